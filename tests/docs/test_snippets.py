"""Every code snippet of the documentation site runs, or comes from a file the suite tests.

A fenced block in ``docs/**/*.md`` is one of:

* an include (``--8<-- "path"``, pymdownx.snippets) of a file under a tested path;
* ``python``: run, the blocks of one page in order in one fresh interpreter (like a reader
  pasting them), from the repository root; a page that imports ``kfp`` runs on the KFP side,
  one that imports ``airflow`` on the Airflow side (``make test`` runs this file on both, and
  no page may need both);
* ``bash``: every line run with ``bash -euo pipefail`` from the repository root;
* ``yaml``: every document parses, and a JobSet among them validates;
* ``json``: parses;
* ``text``, ``mermaid`` or no language: output and diagrams, not code.

Anything else fails, so a new kind of snippet needs a way to be run first.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
#: Where included files may come from: each is exercised by a test of its own (the examples
#: by tests/airflow/test_example_dags.py and tests/kfp, the RBAC files by tests/kfp and
#: tests/airflow/test_rbac_roles.py, the release scripts by tests/release, the changelog is
#: prose).
TESTED_INCLUDES = (
    "examples/",
    "kfp_components/rbac/",
    "airflow_provider_jobset/rbac/",
    "tests/release/",
    "CHANGELOG.md",
)
NOT_CODE = {"", "text", "mermaid"}
#: The framework each adapter needs (snippets and docstring examples run where it is).
_NEEDS = {"airflow_provider_jobset": "airflow", "kfp_components": "kfp"}
_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)\s*(?P<lang>[\w+-]*)[^\n]*$")
_INCLUDE = re.compile(r'^\s*(?:#\s*)?--8<--\s+"(?P<path>[^"]+)"\s*$')


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    body: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    out: list[Block] = []
    lines = page.read_text().splitlines()
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        fence, indent = match["fence"], len(match["indent"])
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j][indent:])
            j += 1
        out.append(Block(page, i + 1, match["lang"].lower(), "\n".join(body)))
        i = j + 1
    return out


def pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def every_block() -> list[Block]:
    return [b for page in pages() for b in blocks(page)]


def includes(block: Block) -> list[str] | None:
    """The included paths when the block is nothing but includes."""
    lines = [ln for ln in block.body.splitlines() if ln.strip()]
    found = [_INCLUDE.match(ln) for ln in lines]
    if lines and all(found):
        return [m["path"] for m in found if m]
    return None


def test_every_block_is_run_or_included() -> None:
    bad = []
    for block in every_block():
        included = includes(block)
        if included is not None:
            for path in included:
                file = path.split(":", 1)[0]
                if not file.startswith(TESTED_INCLUDES) or not (ROOT / file).exists():
                    bad.append(f"{block.where}: includes {path}, not a tested file")
            continue
        if block.lang not in NOT_CODE | {"python", "bash", "yaml", "json"}:
            bad.append(f"{block.where}: a {block.lang!r} block cannot be run; include it")
    assert not bad, "\n".join(bad)


def _code(lang: str) -> list[Block]:
    return [b for b in every_block() if b.lang == lang and includes(b) is None]


def _by_page(lang: str) -> dict[str, list[Block]]:
    grouped: dict[str, list[Block]] = {}
    for block in _code(lang):
        grouped.setdefault(str(block.page.relative_to(ROOT)), []).append(block)
    return grouped


def _env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "airflow-home"
    home.mkdir(exist_ok=True)
    return {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }


def _run_ok(where: str, cmd: list[str], tmp_path: Path) -> None:
    """Run a snippet from the repository root, as a reader would; it must succeed."""
    proc = subprocess.run(
        cmd,
        cwd=ROOT,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, f"{where}:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"


def _needs(page: str) -> set[str]:
    code = "\n".join(b.body for b in _by_page("python")[page])
    imported = set(re.findall(r"^\s*(?:from|import) (\w+)", code, re.M))
    return {_NEEDS.get(m, m) for m in imported} & {"airflow", "kfp"}


def _here() -> set[str]:
    return {m for m in ("airflow", "kfp") if importlib.util.find_spec(m) is not None}


def test_no_page_needs_both_sides() -> None:
    both = [page for page in _by_page("python") if _needs(page) == {"airflow", "kfp"}]
    assert not both, f"pages whose snippets need Airflow and KFP at once: {both}"


@pytest.mark.parametrize("page", sorted(p for p in _by_page("python") if _needs(p) <= _here()))
def test_python_snippets_run(page: str, tmp_path: Path) -> None:
    # A file, not -c: KFP reads a component's source with inspect.getsource.
    script = tmp_path / "snippets.py"
    code = "\n\n".join(f"# --- {b.where}\n{b.body}" for b in _by_page("python")[page])
    script.write_text(code)
    _run_ok(
        page, [sys.executable, "-W", "error::DeprecationWarning:__main__", str(script)], tmp_path
    )


@pytest.mark.parametrize("block", _code("bash"), ids=lambda b: b.where)
def test_bash_snippets_run(block: Block, tmp_path: Path) -> None:
    _run_ok(block.where, ["bash", "-euo", "pipefail", "-c", block.body], tmp_path)


@pytest.mark.parametrize("block", _code("yaml") + _code("json"), ids=lambda b: b.where)
def test_data_snippets_parse_and_jobsets_validate(block: Block) -> None:
    from jobset_core import ensure_valid, load_jobset

    docs = (
        [json.loads(block.body)] if block.lang == "json" else list(yaml.safe_load_all(block.body))
    )
    assert docs, block.where
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "JobSet":
            ensure_valid(load_jobset(doc))


def _rendered_objects() -> list[str]:
    """What the reference pages render with mkdocstrings (``::: dotted.path``)."""
    found = []
    for page in sorted((DOCS / "reference").glob("*.md")):
        found += re.findall(r"^::: ([\w.]+)", page.read_text(), re.M)
    return found


def _resolve(path: str) -> object:
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(path)


def _doctest_targets() -> list[str]:
    return [p for p in _rendered_objects() if _NEEDS.get(p.split(".")[0], "") in _here() | {""}]


@pytest.mark.parametrize("path", _doctest_targets())
def test_docstring_examples_in_the_reference_run(path: str) -> None:
    import doctest

    obj = _resolve(path)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in finder.find(obj, path):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{path}: {result.failed} docstring example(s) failed"
