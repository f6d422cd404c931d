"""What every ``jobsetctl`` subcommand is made of: its streams, its table entry, exit codes.

Both halves of the CLI (:mod:`.local`, :mod:`.cluster`) import from here and never from each
other or from the package, so the package can assemble them without an import cycle.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO, TypeVar

T = TypeVar("T")

__all__ = [
    "EXIT_COMPLETED",
    "EXIT_FAILED",
    "EXIT_INVALID",
    "EXIT_OK",
    "EXIT_PREEMPTED",
    "EXIT_RUN_INVALID",
    "EXIT_TIMEOUT",
    "EXIT_USAGE",
    "Command",
    "Streams",
    "container_name_argument",
    "jobset_name_argument",
    "log_pods_argument",
    "namespace_argument",
    "non_negative_argument",
    "positive_argument",
    "positive_seconds_argument",
    "queue_name_argument",
    "seconds_argument",
]

#: ``validate`` / ``render``: success, invalid input, usage error.
EXIT_OK = 0
EXIT_INVALID = 1
EXIT_USAGE = 2
#: ``run`` / ``status`` / ``delete`` / ``logs``: completed, failed (or an error from the
#: cluster), invalid input, timeout.
EXIT_COMPLETED = 0
EXIT_FAILED = 1
EXIT_RUN_INVALID = 2
EXIT_TIMEOUT = 3
#: ``run --on-preemption retry``: the queue preempted the run; the same command again
#: reattaches to it.
EXIT_PREEMPTED = 4


@dataclass(frozen=True)
class Streams:
    """Where a command writes: ``out`` for its result, ``err`` for diagnostics."""

    out: TextIO
    err: TextIO
    stdin: TextIO


@dataclass(frozen=True)
class Command:
    """One subcommand.

    Attributes:
        name: The subcommand's name on the command line.
        help: One line for ``jobsetctl --help``.
        configure: Adds the subcommand's arguments to its parser.
        run: Does the work; returns the exit code.
    """

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, Streams], int]


# Argument types shared by the commands: a bad value is a usage error (exit 2) naming the flag.


def _checked(check: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """A flag's value through the core's check of the argument (the words every way in says);
    a refusal is argparse's, which names the flag."""
    from jobset_core.lifecycle import InvalidArgument

    try:
        return check(*args, **kwargs)
    except InvalidArgument as err:
        raise argparse.ArgumentTypeError(err.problem) from None


def namespace_argument(text: str) -> str:
    """``-n/--namespace``: an RFC 1123 label, as the API server requires."""
    from jobset_core.lifecycle import namespace

    return _checked(namespace, text)


def jobset_name_argument(text: str) -> str:
    """A JobSet ``NAME``: an RFC 1035 label."""
    from jobset_core.naming import ensure_jobset_name

    try:
        return ensure_jobset_name(text, "name")
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def non_negative_argument(text: str) -> int:
    """A whole number >= 0."""
    from jobset_core.lifecycle import count

    value = _whole(text)
    _checked(count, value, "count")
    return value


def positive_argument(text: str) -> int:
    """A whole number >= 1."""
    from jobset_core.lifecycle import count

    value = _whole(text)
    _checked(count, value, "count", minimum=1)
    return value


def seconds_argument(text: str, *, positive: bool = False) -> float:
    """A finite number of seconds >= 0 (``positive``: > 0)."""
    from jobset_core.lifecycle import seconds

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    _checked(seconds, int(value) if value.is_integer() else value, "seconds", positive=positive)
    return value


def positive_seconds_argument(text: str) -> float:
    """A finite number of seconds > 0."""
    return seconds_argument(text, positive=True)


def queue_name_argument(text: str) -> str:
    """A Kueue LocalQueue or WorkloadPriorityClass name (a DNS label)."""
    from jobset_core.lifecycle import queue_name

    return _checked(queue_name, text, "name") or ""


def log_pods_argument(text: str) -> str:
    """``--log-pods``: ``coordinator``, ``leaders``, ``all`` or a label selector."""
    from jobset_core.lifecycle import log_options

    return _checked(log_options, log_pods=text).pods


def container_name_argument(text: str) -> str:
    """A container name (an RFC 1123 label)."""
    from jobset_core.lifecycle import log_options

    container = _checked(log_options, log_container=text).container
    return container or text
