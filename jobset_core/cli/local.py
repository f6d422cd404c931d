"""``jobsetctl`` subcommands that need no cluster: ``validate`` and ``render``.

* ``jobsetctl validate FILE...``: every problem of every file, one line each as
  ``FILE: field.path: message``; exit 0 when all are valid, 1 otherwise.
* ``jobsetctl render FILE [-n NAMESPACE] [--attempt N]``: the headless Service and the child
  Jobs the upstream controller would create, as multi-document YAML.

``-`` reads standard input. Exit codes: 0 success, 1 invalid input, 2 usage error.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, TextIO

from jobset_core.cli._base import EXIT_INVALID, EXIT_OK, EXIT_USAGE, Command, Streams
from jobset_core.errors import Problem, SpecError

if TYPE_CHECKING:
    from jobset_core.models import JobSet

__all__ = ["RENDER", "VALIDATE"]

_STDIN = "-"
_PLACEMENTS = ("webhook", "affinity")  # jobset_core.render.PLACEMENTS (kept lazy)


# --------------------------------------------------------------------------------------------
# Options shared by commands that check JobSets


def _add_check_options(parser: argparse.ArgumentParser) -> None:
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

    from jobset_core.models import load_jobsets

    source: str | Path = streams.stdin.read() if file == _STDIN else Path(file)
    try:
        return load_jobsets(source, allow_unknown_fields=allow_unknown_fields), []
    except SpecError as err:
        return [], list(err.problems)


def _check(
    jobsets: list[JobSet], gates: Mapping[str, bool], allow_unknown_fields: bool
) -> list[Problem]:
    """Validation problems of every JobSet; paths prefixed by the document when several."""
    from jobset_core.validation import validate

    problems: list[Problem] = []
    for index, jobset in enumerate(jobsets):
        found = validate(jobset, feature_gates=gates, allow_unknown_fields=allow_unknown_fields)
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
                problems = _check(jobsets, args.feature_gates, args.allow_unknown_fields)
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
        "-n",
        "--namespace",
        help="namespace of the objects (default: the JobSet's metadata.namespace, else default)",
    )
    parser.add_argument(
        "--attempt",
        type=_non_negative,
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
    _add_check_options(parser)


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _run_render(args: argparse.Namespace, streams: Streams) -> int:
    from jobset_core.models import dump_yaml
    from jobset_core.render import render

    jobsets, problems = _load(args.file, streams, args.allow_unknown_fields)
    if not problems and len(jobsets) != 1:
        problems = [Problem("", f"expected exactly one JobSet, found {len(jobsets)}", "one")]
    if not problems:
        try:
            problems = _check(jobsets, args.feature_gates, args.allow_unknown_fields)
        except ValueError as err:
            streams.err.write(f"jobsetctl render: {err}\n")
            return EXIT_USAGE
    if problems:
        _report(args.file, problems, streams.err)
        return EXIT_INVALID
    (jobset,) = jobsets
    written = jobset.metadata.namespace
    if args.namespace and written and args.namespace != written:
        streams.err.write(
            f"{_label(args.file)}: metadata.namespace: the JobSet's namespace {written!r} "
            f"does not match --namespace {args.namespace!r}\n"
        )
        return EXIT_INVALID
    rendered = render(
        jobset, args.namespace or written or "default", args.attempt, placement=args.placement
    )
    streams.out.write(dump_yaml(rendered.objects()))
    return EXIT_OK


RENDER = Command(
    name="render",
    help="print the headless Service and the child Jobs of a JobSet as multi-document YAML",
    configure=_configure_render,
    run=_run_render,
)
