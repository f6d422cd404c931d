"""The generated pages of the documentation site (an mkdocs hook, see ``mkdocs.yml``).

Each page is made from the code or the files that define it, at every build, so none can
drift from what the project does:

* ``reference/cli.md``: ``jobsetctl``'s argparse parser (:func:`jobset_core.cli._parser`).
* ``reference/exit-codes.md``: the ``EXIT_*`` constants of ``jobset_core/cli/_base.py`` and
  ``kfp_components/launcher.py`` (read from the source, with the launcher's error table).
* ``reference/devcluster.md``: the pod annotations of the devcluster, from the table in
  ``tests/cluster/README.md``, checked against the annotations ``kwok-stages.yaml`` and
  the log server (``tests/cluster/localcluster/logserver.py``) really read (a mismatch fails
  the build).
* ``reference/matrix.md``: the tested versions, from the lock files in ``requirements/`` and
  the tests marked ``airflow_matrix``.

Beside the pages, the benchmark charts that ``benchmarks.md`` shows: one small SVG per family
(``benchmarks/<family>.svg``), drawn from the committed ``benchmarks/results/latest.json`` by
:mod:`benchmarks.charts` (matplotlib: the docs environment), in memory; nothing lands in the
tree.

The functions are plain (text in, Markdown out) so tests can call them too.
"""

from __future__ import annotations

import argparse
import ast
import gc
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: The benchmark results the docs page and its charts are made from (``make bench`` writes it).
BENCH_RESULTS = "benchmarks/results/latest.json"

#: The packages whose locked version the matrix page shows, in column order.
MATRIX_PACKAGES = (
    ("apache-airflow", "Airflow"),
    ("apache-airflow-task-sdk", "task SDK"),
    ("apache-airflow-providers-cncf-kubernetes", "cncf.kubernetes"),
    ("apache-airflow-providers-common-compat", "common.compat"),
    ("apache-airflow-providers-standard", "standard"),
    ("apache-airflow-providers-openlineage", "openlineage"),
    ("kfp", "kfp"),
    ("kubernetes", "kubernetes"),
    ("kubernetes-asyncio", "kubernetes_asyncio"),
    ("pydantic", "pydantic"),
    ("pyyaml", "PyYAML"),
)
MATRIX_MARKER = "airflow_matrix"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


# --------------------------------------------------------------------------- CLI


def _action_row(parser: argparse.ArgumentParser, action: argparse.Action) -> list[str]:
    if action.option_strings:
        names = ", ".join(f"`{s}`" for s in action.option_strings)
        if action.nargs != 0:
            metavar = action.metavar or action.dest.upper()
            names += f" `{metavar}`"
    else:
        names = f"`{action.metavar or action.dest}`"
    formatter = parser._get_formatter()
    help_text = formatter._expand_help(action) if action.help else ""
    default = ""
    if action.default not in (None, argparse.SUPPRESS, False) and action.nargs != 0:
        default = f"`{action.default}`"
    if action.choices and not isinstance(action, argparse._SubParsersAction):
        help_text += " (one of: " + ", ".join(f"`{c}`" for c in action.choices) + ")"
    if action.nargs in ("*", "+") or isinstance(action, argparse._AppendAction):
        help_text += " (repeatable)" if isinstance(action, argparse._AppendAction) else ""
    return [names, default, _cell(help_text)]


def _arguments_table(parser: argparse.ArgumentParser) -> list[str]:
    rows = [
        _action_row(parser, a)
        for a in parser._actions
        if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))
    ]
    if not rows:
        return []
    out = ["| argument | default | meaning |", "|---|---|---|"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out


def cli_page(parser: argparse.ArgumentParser | None = None) -> str:
    """The ``jobsetctl`` reference, from its parser."""
    if parser is None:
        from jobset_core.cli import _parser

        parser = _parser()
    lines = [
        "# `jobsetctl`",
        "",
        "Generated from the command's argparse parser (`jobset_core.cli._parser()`); the same",
        "text as `jobsetctl COMMAND --help`. Exit codes: [Exit codes](exit-codes.md).",
        "",
        f"{parser.description}",
        "",
        "```text",
        parser.format_usage().strip(),
        "```",
        "",
    ]
    lines += _arguments_table(parser)
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: c.help for c in subparsers._choices_actions}
    for name, child in subparsers.choices.items():
        lines += ["", f"## `{name}`", "", helps.get(name) or "", "", "```text"]
        lines += [child.format_usage().strip(), "```", ""]
        lines += _arguments_table(child)
    return "\n".join(lines) + "\n"


def parse(source: str) -> ast.Module:
    """``ast.parse``, with no collection while the tree is built.

    CPython 3.11 counts the depth of the tree it builds in one counter per interpreter
    (python/cpython#106905): if a collection runs a finalizer midway, another thread may take
    the GIL and parse too, and the count comes out wrong (``SystemError: AST constructor
    recursion depth mismatch``; a test process has threads that format tracebacks, which
    parses). Without a collection nothing runs Python code, so nothing lets the GIL go, while
    the tree is built.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(source)
    finally:
        if enabled:
            gc.enable()


# --------------------------------------------------------------------------- exit codes


def _constants(source: str) -> list[tuple[str, int, str]]:
    """``EXIT_*`` constants of a module: (name, value, the ``#:`` comment above it)."""
    tree = parse(source)
    lines = source.splitlines()
    out = []
    for node in tree.body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target = node.targets[0]
        if not (isinstance(target, ast.Name) and target.id.startswith("EXIT_")):
            continue
        if not isinstance(node.value, ast.Constant) or not isinstance(node.value.value, int):
            continue
        comment: list[str] = []
        i = node.lineno - 2
        while i >= 0 and lines[i].lstrip().startswith("#:"):
            comment.insert(0, lines[i].lstrip()[2:].strip())
            i -= 1
        out.append((target.id, node.value.value, " ".join(comment)))
    return out


#: The anchor prefix of an error class's entry on the Troubleshooting page, by package.
ANCHOR_PREFIX = {"jobset_core": "", "airflow_provider_jobset": "airflow-", "kfp_components": "kfp-"}


def error_anchor(module: str, name: str) -> str:
    """The Troubleshooting anchor of error class ``name`` defined in ``module``."""
    return ANCHOR_PREFIX[module.split(".", maxsplit=1)[0]] + name


def defined_in(source: str, name: str, module: str) -> str:
    """Where ``name`` used in a module comes from (its ``from X import name``), else there."""
    for node in parse(source).body:
        if isinstance(node, ast.ImportFrom) and any(
            (a.asname or a.name) == name for a in node.names
        ):
            return node.module or module
    return module


def _error_table(source: str, function: str) -> dict[str, list[str]]:
    """The ``(ErrorClass, EXIT_NAME)`` pairs of the table in ``function``."""
    tree = parse(source)
    found: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == function:
            for pair in ast.walk(node):
                if (
                    isinstance(pair, ast.Tuple)
                    and len(pair.elts) == 2
                    and all(isinstance(e, ast.Name) for e in pair.elts)
                ):
                    error, code = (e.id for e in pair.elts)  # type: ignore[attr-defined]
                    if code.startswith("EXIT_"):
                        found.setdefault(code, []).append(error)
    return found


def exit_codes_page(root: Path = ROOT) -> str:
    """The exit codes of ``jobsetctl`` and of the KFP launcher, from their constants."""
    cli = _constants((root / "jobset_core/cli/_base.py").read_text())
    launcher_src = (root / "kfp_components/launcher.py").read_text()
    launcher = _constants(launcher_src)
    errors = _error_table(launcher_src, "exit_code")
    lines = [
        "# Exit codes",
        "",
        "Generated from the `EXIT_*` constants in `jobset_core/cli/_base.py` (`jobsetctl`) and",
        "`kfp_components/launcher.py` (the KFP launcher, with the error each code stands for).",
        "What each error means: [Troubleshooting](../troubleshooting.md).",
        "",
        "## `jobsetctl`",
        "",
    ]
    for name, value, text in cli:
        if text:  # a new group: the comment above its first constant says what they mean
            lines += ["", text.replace("``", "`"), "", "| code | constant |", "|---|---|"]
        lines.append(f"| {value} | `{name}` |")
    lines += [
        "",
        "## KFP launcher (`python -m kfp_components.launcher`, the component steps)",
        "",
        "| code | constant | raised for |",
        "|---|---|---|",
    ]
    for name, value, _ in launcher:
        raised = ", ".join(
            f"[`{e}`](../troubleshooting.md#"
            f"{error_anchor(defined_in(launcher_src, e, 'kfp_components.launcher'), e)})"
            for e in errors.get(name, [])
        )
        lines.append(f"| {value} | `{name}` | {raised or '-'} |")
    lines += [
        "",
        "Any other exception ends the step with Python's traceback and exit status 1.",
    ]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- devcluster

_ANNOTATION_ROW = re.compile(
    r"^\| `(?P<key>devcluster/[a-z-]+)(?P<rest>[^`]*)` \|(?P<effect>.*)\|$"
)
_USED = re.compile(r"devcluster/[a-z][a-z-]*")


def documented_annotations(readme: str) -> list[tuple[str, str, str]]:
    """(annotation, value form, effect) rows of the annotation table in the devcluster
    README."""
    rows = []
    for line in readme.splitlines():
        match = _ANNOTATION_ROW.match(line.strip())
        if match:
            rows.append((match["key"], match["rest"].lstrip(": "), match["effect"].strip()))
    return rows


def used_annotations(stages: str, launcher: str) -> set[str]:
    """Annotations the kwok stages read (comments ignored) and the log server serves."""
    body = "\n".join(ln for ln in stages.splitlines() if not ln.lstrip().startswith("#"))
    used = set(_USED.findall(body))
    used |= {m for m in re.findall(r'"(devcluster/[a-z-]+)"', launcher) if m != "devcluster/slice"}
    return used


def devcluster_page(root: Path = ROOT) -> str:
    """The pod-behaviour annotations of the devcluster; fails when the README's table and
    the stage file disagree."""
    cluster = root / "tests/cluster"
    rows = documented_annotations((cluster / "README.md").read_text())
    used = used_annotations(
        (cluster / "kwok-stages.yaml").read_text(),
        (cluster / "localcluster" / "logserver.py").read_text(),
    )
    documented = {key for key, _, _ in rows}
    if documented != used:
        raise ValueError(
            "tests/cluster/README.md's annotation table and the annotations the devcluster "
            f"reads differ: only documented {sorted(documented - used)}, "
            f"only read {sorted(used - documented)}"
        )
    lines = [
        "# Devcluster pod annotations",
        "",
        "The local control plane of the test suite runs no containers: fake nodes play each",
        "pod's life from annotations on the pod template (JobSet → Job → pod template",
        "`metadata.annotations`). Generated from `tests/cluster/README.md` and checked against",
        "what `tests/cluster/kwok-stages.yaml` and the log server really read.",
        "",
        "| annotation | value | effect |",
        "|---|---|---|",
    ]
    lines += [f"| `{k}` | `{v}` | {e} |" for k, v, e in rows]
    lines += [
        "",
        "Precedence: `never-finish` > `fail-until-attempt` > `exit-code`. Without annotations a",
        "Job's pod runs 1 s and succeeds. The devcluster itself: `tests/cluster/README.md`.",
    ]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- matrix


def locked_versions(lock: str) -> dict[str, str]:
    """``name -> version`` of a uv-compiled lock file."""
    pins = {}
    for line in lock.splitlines():
        match = re.match(r"^([A-Za-z0-9_.-]+)==([^\s;]+)", line)
        if match:
            pins[match[1].lower().replace("_", "-")] = match[2]
    return pins


def matrix_locks(root: Path = ROOT) -> list[Path]:
    """The environments of the test matrix: the main sides and one per older minor."""
    req = root / "requirements"
    older = sorted(
        req.glob("airflow-3.*.txt"), key=lambda p: [int(x) for x in p.stem[8:].split(".")]
    )
    ends = [req / "core-floor.txt", req / "core-ceiling.txt"]
    return [req / "airflow.txt", *older, req / "kfp.txt", *ends]


def matrix_tests(root: Path = ROOT) -> list[tuple[str, bool]]:
    """(``file::test``, needs the cluster) of every test carrying the ``airflow_matrix``
    marker."""
    found = []
    for path in sorted((root / "tests/airflow").glob("test_*.py")):
        tree = parse(path.read_text())
        module_marks = " ".join(
            ast.unparse(node)
            for node in tree.body
            if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets)
        )
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith(
                "test"
            ):
                marks = module_marks + " ".join(ast.unparse(d) for d in node.decorator_list)
                if MATRIX_MARKER in marks:
                    found.append((f"{path.relative_to(root)}::{node.name}", "cluster" in marks))
    return found


def _what_runs(name: str) -> str:
    if name == "airflow":
        return "everything: lint, core, devcluster, Airflow adapter (unit, cluster, end to end)"
    if name == "kfp":
        return "core and the KFP adapter (unit and cluster), at every runtime dependency's floor"
    if name.startswith("core-"):
        return "the built wheel alone: `jobsetctl validate` and the core's tests without a cluster"
    return "the Airflow adapter's unit tests and the `airflow_matrix` cluster subset"


def lock_pythons(root: Path = ROOT) -> dict[str, str]:
    """``requirements/pythons.txt``: the environments not on the machine's Python 3.11."""
    listed = {}
    for line in (root / "requirements/pythons.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            environment, *pythons = line.split()
            listed[environment] = ", ".join(pythons)
    return listed


def matrix_page(root: Path = ROOT) -> str:
    """The tested versions, one row per lock file."""
    floor = locked_versions((root / "requirements/core-floor.txt").read_text())
    pythons = lock_pythons(root)
    floors = ", ".join(f"`{label}` {floor[pkg]}" for pkg, label in MATRIX_PACKAGES if pkg in floor)
    header = ["environment", "Python", *(label for _, label in MATRIX_PACKAGES), "what runs"]
    lines = [
        "# Tested matrix",
        "",
        "Generated from the lock files in `requirements/`: each row is one Python environment",
        "that `make test` builds and runs, against the devcluster (Kubernetes v1.36, JobSet",
        "v0.12.0) where it needs a cluster. Every Airflow 3 minor the package accepts",
        "(`apache-airflow>=3.0.6,<4`) has a row. An older minor's row is its newest patch with",
        "PyPI as it was on that patch's release day, as Airflow's constraints for it pin",
        "(`scripts/lock.sh`), except for packages this one needs newer.",
        "",
        "Every range the core declares is tested at both ends: `kfp` and `core-floor` hold the",
        f"lower bound of each ({floors}), `core-ceiling` the newest each range admits, and",
        "`airflow` the newest `kubernetes_asyncio`, `pydantic` and `PyYAML` on the cluster (the",
        "cncf provider caps `kubernetes` there; the core uses that client only for its offline",
        "schema check). The",
        "`core-*` rows install the built wheel, not the work tree.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for lock in matrix_locks(root):
        pins = locked_versions(lock.read_text())
        cells = [f"`{lock.stem}`", pythons.get(lock.stem, "3.11")]
        cells += [pins.get(pkg, "-") for pkg, _ in MATRIX_PACKAGES]
        cells.append(_what_runs(lock.stem))
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "## The cluster subset run on every Airflow minor",
        "",
        "Controller backend, worker and deferrable mode: success, a terminal failure never",
        "retried, a restart that becomes a retry, a SIGKILLed worker whose next try reattaches,",
        "and a kill that deletes everything (tests marked `airflow_matrix` and `cluster`):",
        "",
    ]
    tests = matrix_tests(root)
    lines += [f"- `{t}`" for t, cluster in tests if cluster]
    lines += ["", "Version-specific unit tests marked `airflow_matrix`:", ""]
    lines += [f"- `{t}`" for t, cluster in tests if not cluster]
    lines += [
        "",
        "Before Airflow 3.3 the provider runs without the task state store, the trigger's",
        "`on_kill` and retry policies; `tests/airflow/test_compat.py` checks on each minor that",
        "the right path is taken ([what differs](../concepts/retries.md#before-airflow-33)).",
    ]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- mkdocs hook

PAGES = {
    "reference/cli.md": cli_page,
    "reference/exit-codes.md": exit_codes_page,
    "reference/devcluster.md": devcluster_page,
    "reference/matrix.md": matrix_page,
}


def benchmark_charts(root: Path = ROOT) -> dict[str, bytes]:
    """The charts of ``benchmarks.md``: by site path, one SVG per family of the results file
    (the drawing of ``make bench``'s PNGs)."""
    # mkdocs runs the hook from its own script: the checkout is not on the path.
    saved = sys.path.copy()
    sys.path.insert(0, str(root))
    try:
        from benchmarks.charts import render
        from benchmarks.report import chart_uri
        from benchmarks.results import Results
    finally:
        sys.path[:] = saved
    results = Results.read(root / BENCH_RESULTS)
    return {chart_uri(family): svg for family, svg in render(results, "svg").items()}


def on_files(files: Any, config: Any) -> Any:
    """mkdocs hook: add the generated pages and the benchmark charts to the site."""
    from mkdocs.structure.files import File

    for uri, make in PAGES.items():
        files.append(File.generated(config, uri, content=make()))
    for uri, svg in benchmark_charts().items():
        files.append(File.generated(config, uri, content=svg))
    return files


#: A Sphinx role as the Python handler leaves it in a page (the docstrings are written for
#: readers of the source and for ``help()``): ``:class:`~jobset_core.models.JobSet``` arrives
#: as ``:class:<code>~jobset_core.models.JobSet</code>``.
_ROLE_NAME = r":(?:py:)?(?:class|func|meth|data|mod|attr|exc|obj|const):"
ROLE = re.compile(_ROLE_NAME + r"<code>(.*?)</code>")
#: Any role left after :func:`cross_references` (another markup): the build fails on it.
RAW_ROLE = re.compile(_ROLE_NAME + r"[<`]")


def cross_references(html: str) -> str:
    """Each role becomes the code it names, linked by autorefs where the name is an object
    of the site (``~`` shows the last part only); a name the site does not document (a
    private module, a relative name) stays plain code, without a warning."""

    def one(match: re.Match[str]) -> str:
        target = match[1]
        shown = target.lstrip("~.")
        if target.startswith("~"):
            shown = shown.rsplit(".", 1)[-1]
        identifier = target.lstrip("~").lstrip(".")
        return f'<autoref identifier="{identifier}" optional><code>{shown}</code></autoref>'

    return ROLE.sub(one, html)


def raw_role_left(html: str) -> str | None:
    """The text around the first role :func:`cross_references` could not read, if any."""
    left = RAW_ROLE.search(html)
    return None if left is None else html[max(0, left.start() - 60) : left.end() + 60]


#: A signature block of the reference, and the longest line one may have once formatted.
SIGNATURE = re.compile(r'<div class="doc-signature[^"]*"><pre>(.*?)</pre>', re.DOTALL)
SIGNATURE_WIDTH = 100


def unformatted_signature(html: str) -> str | None:
    """The first signature line wider than :data:`SIGNATURE_WIDTH` (mkdocstrings formats
    signatures one argument per line only when it finds ruff in the environment)."""
    import html as entities

    for block in SIGNATURE.findall(html):
        text = entities.unescape(re.sub(r"<[^>]+>", "", block))
        wide = [line for line in text.splitlines() if len(line) > SIGNATURE_WIDTH]
        if wide:
            return wide[0][:160]
    return None


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    """mkdocs hook: no raw Sphinx role on a rendered page, and every signature formatted (the
    build fails otherwise)."""
    html = cross_references(html)
    around, wide = raw_role_left(html), unformatted_signature(html)
    if around is not None or wide is not None:
        from mkdocs.exceptions import PluginError

        what = (
            f"a raw role is left on the page: {around!r}"
            if around is not None
            else f"a signature is not formatted (ruff in the docs environment?): {wide!r}"
        )
        raise PluginError(f"{page.file.src_uri}: {what}")
    return html


def generated_uris() -> Iterable[str]:
    return PAGES.keys()
