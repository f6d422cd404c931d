"""``jobsetctl``: check, render and run JobSets from the command line.

Subcommands (each a :class:`Command` in :data:`COMMANDS`; a new one is one more entry):
``validate`` and ``render`` (:mod:`.local`, no cluster needed), ``run``, ``status``,
``delete`` and ``logs`` (:mod:`.cluster`, clients imported on first use).

:func:`main` returns the exit code (the console script passes it to ``sys.exit``); nothing
here exits the process. ``python -m jobset_core.cli`` runs it too.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from contextlib import redirect_stderr, redirect_stdout
from typing import TextIO

from jobset_core.cli._base import (
    EXIT_COMPLETED,
    EXIT_FAILED,
    EXIT_INVALID,
    EXIT_OK,
    EXIT_RUN_INVALID,
    EXIT_TIMEOUT,
    EXIT_USAGE,
    Command,
    Streams,
)
from jobset_core.cli.cluster import CLI_SETTINGS, CLUSTER_COMMANDS
from jobset_core.cli.local import RENDER, VALIDATE

__all__ = [
    "CLI_SETTINGS",
    "COMMANDS",
    "EXIT_BROKEN_PIPE",
    "EXIT_COMPLETED",
    "EXIT_FAILED",
    "EXIT_INVALID",
    "EXIT_OK",
    "EXIT_RUN_INVALID",
    "EXIT_TIMEOUT",
    "EXIT_USAGE",
    "Command",
    "Streams",
    "main",
    "script",
]

#: Every subcommand, in ``--help`` order.
COMMANDS: tuple[Command, ...] = (VALIDATE, RENDER, *CLUSTER_COMMANDS)


def main(
    argv: Sequence[str] | None = None,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    stdin: TextIO | None = None,
) -> int:
    """Run ``jobsetctl`` with ``argv`` (default: the process arguments); return the exit code.

    Example:
        >>> main(["validate", "jobset.yaml"])  # doctest: +SKIP
        0
    """
    streams = Streams(stdout or sys.stdout, stderr or sys.stderr, stdin or sys.stdin)
    parser = _parser()
    try:
        with redirect_stdout(streams.out), redirect_stderr(streams.err):
            args = parser.parse_args(argv)
    except SystemExit as stop:  # argparse exits on --help (0) and on usage errors (2)
        return stop.code if isinstance(stop.code, int) else EXIT_USAGE
    command: Command = args.command
    try:
        code = command.run(args, streams)
        streams.out.flush()  # a closed pipe is found here, not at the interpreter's exit
    except BrokenPipeError:
        # The reader went away (jobsetctl render ... | head -1): stop quietly, as the tools
        # of a shell pipeline do, with the status of a process killed by SIGPIPE.
        _silence(streams.out)
        return EXIT_BROKEN_PIPE
    return code


def script() -> int:
    """The ``jobsetctl`` console script and ``python -m jobset_core.cli``: :func:`main` in a
    process of its own.

    Such a process does not load pydantic's plugins (hooks for observability tools, found by
    reading every installed distribution's entry points: about 35 ms of a start in an Airflow
    environment) unless ``PYDANTIC_DISABLE_PLUGINS`` says otherwise.

    Nor does it collect cyclic garbage while it starts: what a start builds (modules, the
    models' validators) lives until the process ends, and the collections that walk it find
    almost nothing (about 10 ms of a ``validate``). A command that talks to a cluster turns
    collection back on when it begins (it may wait for hours); the offline ones end first.
    At the end the objects are frozen, so the interpreter's exit frees them without walking
    them all once more (about 25 ms); ``atexit`` handlers and the streams' flush run as ever.

    :func:`main` itself changes no environment, and leaves the collector as it found it: a
    program that calls it keeps its own.
    """
    import gc
    import os

    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    gc.disable()
    try:
        return main()
    finally:
        gc.freeze()


#: The exit code after the reader of standard output went away: 128 + SIGPIPE, what a shell
#: reports for a tool that SIGPIPE ended.
EXIT_BROKEN_PIPE = 141


def _silence(stream: TextIO) -> None:
    """Point the process's standard output at /dev/null when ``stream`` is it, so the
    interpreter's last flush at exit does not fail again on the closed pipe."""
    import os

    try:
        fileno = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a file (a test's StringIO): nothing is flushed at exit
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fileno)
    finally:
        os.close(devnull)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jobsetctl",
        description="Check, render and run Kubernetes JobSets (jobset.x-k8s.io/v1alpha2).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
    for command in COMMANDS:
        child = sub.add_parser(command.name, help=command.help, description=command.help)
        command.configure(child)
        child.set_defaults(command=command)
    return parser


def _version() -> str:
    # The one place the version is written (what the distribution's metadata says too):
    # reading it costs nothing, where the installed distributions' metadata is searched.
    from jobset_core._version import __version__

    return __version__
