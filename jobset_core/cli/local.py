"""``jobsetctl`` subcommands that need no cluster: ``validate`` and ``render``.

* ``jobsetctl validate FILE... [-n NAMESPACE]``: every problem of every file, one line each as
  ``FILE: field.path: message``; exit 0 when all are valid, 1 otherwise. A file that cannot be
  read (missing, too large, not UTF-8, not YAML) is one problem of that file; the run goes on
  with the next.
* ``jobsetctl render FILE [-n NAMESPACE] [--attempt N] [--max-jobs N]``: the headless Service
  and the child Jobs the upstream controller would create, as multi-document YAML, written one
  object at a time; more than ``--max-jobs`` Jobs (default
  :data:`~jobset_core.limits.MAX_RENDERED_JOBS`) is refused before any is built.

``-`` reads standard input. Input is read within :mod:`jobset_core.limits`. A namespace flag
must be a valid namespace name (usage error otherwise). Exit codes: 0 success, 1 invalid input,
2 usage error.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, TextIO

from jobset_core.cli._base import (
    EXIT_INVALID,
    EXIT_OK,
    EXIT_USAGE,
    Command,
    Streams,
    namespace_argument,
    non_negative_argument,
)
from jobset_core.errors import Problem, SpecError
from jobset_core.limits import MAX_RENDERED_JOBS

if TYPE_CHECKING:
    from jobset_core.models import JobSet

__all__ = ["RENDER", "VALIDATE"]

_STDIN = "-"
_PLACEMENTS = ("webhook", "affinity")  # jobset_core.render.PLACEMENTS (kept lazy)


# --------------------------------------------------------------------------------------------
# Options shared by commands that check JobSets


def _add_check_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-n",
        "--namespace",
        type=namespace_argument,
        help="the namespace the JobSet is created in (default: its metadata.namespace, else "
        "default); a different metadata.namespace is a problem",
    )
    parser.add_argument(
        "--allow-unknown-fields",
        action="store_true",
        help="carry fields newer than the models instead of reporting them",
    )
    parser.add_argument(
        "--feature-gates",
        metavar="GATE=BOOL,...",
        type=_feature_gates,
        default={},
        help="the controller's feature gates, e.g. RestartJob=true",
    )


def _feature_gates(text: str) -> dict[str, bool]:
    gates: dict[str, bool] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or value.lower() not in ("true", "false"):
            raise argparse.ArgumentTypeError(f"expected GATE=true|false, got {item!r}")
        gates[key.strip()] = value.lower() == "true"
    return gates


def _label(file: str) -> str:
    return "<stdin>" if file == _STDIN else file


def _load(
    file: str, streams: Streams, allow_unknown_fields: bool
) -> tuple[list[JobSet], list[Problem], list[JobSet]]:
    """The JobSets of one file (any name is a path; ``-`` is standard input), or its problems.

    When the models refuse fields, the third item holds every document rebuilt without those
    fields (empty when one cannot be), so that the rest of each is validated too and every
    problem of the file is reported at once.
    """
    from pathlib import Path

    from jobset_core.models import load_jobsets, load_yaml_documents, read_bounded, read_stream

    text: str | None = None
    try:
        if file == _STDIN:
            text = read_stream(streams.stdin)
            source: str | Path = text
        else:
            source = Path(file)
        return load_jobsets(source, allow_unknown_fields=allow_unknown_fields), [], []
    except SpecError as err:
        problems = list(err.problems)
    try:
        documents = load_yaml_documents(
            text if text is not None else read_bounded(Path(file), file), file
        )
    except SpecError:  # the file itself is the problem (unreadable, too large, not YAML)
        return [], problems, []
    return [], problems, _rebuilt(documents, problems, allow_unknown_fields)


#: How many times a document is rebuilt without the fields the models refused (a field refused
#: only once its parent is valid is found in the next round).
_REBUILD_ROUNDS = 3


def _rebuilt(
    documents: list[object], problems: list[Problem], allow_unknown_fields: bool
) -> list[JobSet]:
    from jobset_core.models import JobSet as Model
    from jobset_core.models import load_jobset

    multi = len(documents) > 1
    out: list[Model] = []
    for index, document in enumerate(documents):
        prefix = f"<document {index}>" if multi else ""
        refused = {_local_path(p.path, prefix) for p in problems if _within(p.path, prefix)}
        data, jobset = document, None
        for _ in range(_REBUILD_ROUNDS):
            data = _without(data, refused)
            if not isinstance(data, Mapping):
                return []
            try:
                jobset = load_jobset(data, allow_unknown_fields=allow_unknown_fields)
                break
            except SpecError as err:
                refused = {p.path for p in err.problems}
        if jobset is None:
            return []
        out.append(jobset)
    return out


def _within(path: str, prefix: str) -> bool:
    return not prefix or path == prefix or path.startswith((f"{prefix}.", f"{prefix}["))


def _local_path(path: str, prefix: str) -> str:
    return path[len(prefix) :].lstrip(".") if prefix else path


def _without(data: object, paths: set[str]) -> object:
    """``data`` without the nodes at ``paths`` (field paths as :func:`format_path` writes
    them)."""
    from jobset_core.errors import format_path

    def walk(node: object, loc: tuple[str | int, ...]) -> object:
        if isinstance(node, Mapping):
            return {
                key: walk(value, (*loc, str(key)))
                for key, value in node.items()
                if format_path((*loc, str(key))) not in paths
            }
        if isinstance(node, list):
            return [
                walk(value, (*loc, i))
                for i, value in enumerate(node)
                if format_path((*loc, i)) not in paths
            ]
        return node

    return walk(data, ())


def _check(
    jobsets: list[JobSet],
    gates: Mapping[str, bool],
    allow_unknown_fields: bool,
    namespace: str | None,
) -> list[Problem]:
    """Validation problems of every JobSet; paths prefixed by the document when several."""
    from jobset_core.validation import validate

    problems: list[Problem] = []
    for index, jobset in enumerate(jobsets):
        found = validate(
            jobset,
            feature_gates=gates,
            allow_unknown_fields=allow_unknown_fields,
            namespace=namespace,
        )
        if len(jobsets) > 1:
            found = [_in_document(index, p) for p in found]
        problems.extend(found)
    return problems


def _in_document(index: int, problem: Problem) -> Problem:
    # The same prefix loading uses for the documents of a multi-document file.
    head = f"<document {index}>"
    return Problem(
        f"{head}.{problem.path}" if problem.path else head, problem.message, problem.rule
    )


#: How ``validate`` and ``render`` carry fields newer than the models.
CARRY_FLAG = "pass --allow-unknown-fields to carry it"


def _report(file: str, problems: Sequence[Problem], stream: TextIO) -> None:
    for problem in problems:
        stream.write(f"{_label(file)}: {problem.respelled(CARRY_FLAG)}\n")


# --------------------------------------------------------------------------------------------
# validate


def _configure_validate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help="YAML/JSON file, or - for stdin")
    _add_check_options(parser)
    parser.add_argument(
        "--server",
        action="store_true",
        help="also ask the cluster (--kubeconfig/--context): a server-side dry run of each "
        "JobSet, its child Jobs and pods as they would be created in the namespace, as your "
        "identity, with the namespace's admission (Pod Security, quotas, limits, webhooks); "
        "nothing is created",
    )
    parser.add_argument("--kubeconfig", help="with --server: kubeconfig file")
    parser.add_argument("--context", help="with --server: kubeconfig context")
    parser.add_argument(
        "--backend",
        choices=("auto", "controller", "native"),
        default="auto",
        help="with --server: what is checked (the JobSet, or the native backend's objects)",
    )


def _run_validate(args: argparse.Namespace, streams: Streams) -> int:
    invalid = False
    for file in args.files:
        try:
            problems = _file_problems(file, streams, args)[1]
        except ValueError as err:  # an unknown feature gate
            streams.err.write(f"jobsetctl validate: {err}\n")
            return EXIT_USAGE
        if args.server and not problems:
            problems = _server_problems(file, streams, args)
        _report(file, problems, streams.out)
        invalid = invalid or bool(problems)
    return EXIT_INVALID if invalid else EXIT_OK


def _server_problems(file: str, streams: Streams, args: argparse.Namespace) -> list[Problem]:
    """The cluster's verdict on a file valid offline (``--server``): its refusals, and a
    line on standard error for what it could not judge."""
    from jobset_core.cli.cluster import server_problems
    from jobset_core.errors import JobSetError

    jobsets = _load(file, streams, args.allow_unknown_fields)[0]
    try:
        problems, unchecked = server_problems(args, _label(file), jobsets)
    except JobSetError as err:
        return [Problem("", f"the cluster could not be asked: {err}", "server")]
    for line in unchecked:
        streams.err.write(f"{_label(file)}: note: {line}\n")
    return problems


def _file_problems(
    file: str, streams: Streams, args: argparse.Namespace
) -> tuple[list[JobSet], list[Problem]]:
    """The JobSets of a file and every problem of it: what the models refuse, and what
    validation finds in the rest of each document (a refused field is left out of that
    check, so nothing is reported twice).

    Raises:
        ValueError: an unknown feature gate.
    """
    from jobset_core.validation import sort_problems

    jobsets, problems, rebuilt = _load(file, streams, args.allow_unknown_fields)
    if not problems and not jobsets:
        problems = [Problem("", "no JobSet found", "no-document")]
    if not problems:
        problems = _check(jobsets, args.feature_gates, args.allow_unknown_fields, args.namespace)
    elif rebuilt:
        refused = {p.path for p in problems}
        more = _check(rebuilt, args.feature_gates, args.allow_unknown_fields, args.namespace)
        problems = sort_problems([*problems, *(p for p in more if not _under_any(p.path, refused))])
    return jobsets, problems


def _under_any(path: str, refused: set[str]) -> bool:
    return any(path == r or path.startswith((f"{r}.", f"{r}[")) for r in refused if r)


VALIDATE = Command(
    name="validate",
    help="check JobSet files; print one line per problem as FILE: field.path: message",
    configure=_configure_validate,
    run=_run_validate,
)


# --------------------------------------------------------------------------------------------
# render


def _configure_render(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="YAML/JSON file with one JobSet, or -")
    parser.add_argument(
        "--attempt",
        type=non_negative_argument,
        default=0,
        metavar="N",
        help="restart attempt (the JobSet's status.restarts) the Jobs are created for",
    )
    parser.add_argument(
        "--placement",
        choices=_PLACEMENTS,
        default="webhook",
        help="exclusive placement as upstream's pod webhook does it (default), or as "
        "pod-template affinity for clusters without that webhook",
    )
    parser.add_argument(
        "--max-jobs",
        type=non_negative_argument,
        default=MAX_RENDERED_JOBS,
        metavar="N",
        help=f"refuse to render more than N child Jobs (default {MAX_RENDERED_JOBS})",
    )
    parser.add_argument(
        "--no-inject-env",
        dest="inject_env",
        action="store_false",
        help="render without JOBSET_NAME, JOBSET_RESTART_ATTEMPT... in the containers (what "
        "jobsetctl run --no-inject-env and inject_env=False submit)",
    )
    _add_check_options(parser)


def _run_render(args: argparse.Namespace, streams: Streams) -> int:
    from jobset_core.models import dump_yaml
    from jobset_core.render import render
    from jobset_core.workload import inject_workload_env

    try:
        jobsets, problems = _file_problems(args.file, streams, args)
    except ValueError as err:
        streams.err.write(f"jobsetctl render: {err}\n")
        return EXIT_USAGE
    if not problems and len(jobsets) != 1:
        problems = [Problem("", f"expected exactly one JobSet, found {len(jobsets)}", "one")]
    rendered = None
    if not problems:
        (jobset,) = jobsets
        if args.inject_env:  # as every way of running submits it
            jobset = inject_workload_env(jobset)
        namespace = args.namespace or jobset.metadata.namespace or "default"
        try:
            rendered = render(
                jobset, namespace, args.attempt, placement=args.placement, max_jobs=args.max_jobs
            )
        except SpecError as err:
            problems = list(err.problems)
    if rendered is None:
        _report(args.file, problems, streams.err)
        return EXIT_INVALID
    for index, obj in enumerate(rendered.objects()):
        streams.out.write(("---\n" if index else "") + dump_yaml([obj]))
    return EXIT_OK


RENDER = Command(
    name="render",
    help="print the headless Service and the child Jobs of a JobSet as multi-document YAML",
    configure=_configure_render,
    run=_run_render,
)
