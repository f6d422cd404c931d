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
) -> tuple[list[JobSet], list[Problem]]:
    """The JobSets of one file (any name is a path; ``-`` is standard input), or its problems."""
    from pathlib import Path

    from jobset_core.models import load_jobsets, read_stream

    try:
        source: str | Path = read_stream(streams.stdin) if file == _STDIN else Path(file)
        return load_jobsets(source, allow_unknown_fields=allow_unknown_fields), []
    except SpecError as err:
        return [], list(err.problems)


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


def _report(file: str, problems: Sequence[Problem], stream: TextIO) -> None:
    for problem in problems:
        stream.write(f"{_label(file)}: {problem}\n")


# --------------------------------------------------------------------------------------------
# validate


def _configure_validate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help="YAML/JSON file, or - for stdin")
    _add_check_options(parser)


def _run_validate(args: argparse.Namespace, streams: Streams) -> int:
    invalid = False
    for file in args.files:
        jobsets, problems = _load(file, streams, args.allow_unknown_fields)
        if not problems and not jobsets:
            problems = [Problem("", "no JobSet found", "no-document")]
        if not problems:
            try:
                problems = _check(
                    jobsets, args.feature_gates, args.allow_unknown_fields, args.namespace
                )
            except ValueError as err:  # an unknown feature gate
                streams.err.write(f"jobsetctl validate: {err}\n")
                return EXIT_USAGE
        _report(file, problems, streams.out)
        invalid = invalid or bool(problems)
    return EXIT_INVALID if invalid else EXIT_OK


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

    jobsets, problems = _load(args.file, streams, args.allow_unknown_fields)
    if not problems and len(jobsets) != 1:
        problems = [Problem("", f"expected exactly one JobSet, found {len(jobsets)}", "one")]
    if not problems:
        try:
            problems = _check(
                jobsets, args.feature_gates, args.allow_unknown_fields, args.namespace
            )
        except ValueError as err:
            streams.err.write(f"jobsetctl render: {err}\n")
            return EXIT_USAGE
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
