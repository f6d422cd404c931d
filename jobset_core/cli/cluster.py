"""``jobsetctl`` subcommands that talk to a cluster: ``run``, ``status``, ``delete``, ``logs``.

* ``jobsetctl run FILE [--backend auto|controller|native] [-n NS] [--timeout S]
  [--follow-logs] [--delete-policy P] [--queue Q --priority-class P --admission-timeout S
  --on-preemption wait|retry|fail]``: submit (or reattach to) the JobSet, wait, print one
  progress line per change (queued, admitted, preempted... when a Kueue queue holds it), then
  the outcome and the result.
* ``jobsetctl status NAME [-n NS] [-o json]``: a human summary, or the JobSet status shape
  (conditions, terminalState, restarts, restartsCountTowardsMax, replicatedJobsStatus) for
  either backend, with a ``queue`` section when Kueue holds the run.
* ``jobsetctl delete NAME [-n NS] [--wait]``: delete with foreground propagation.
* ``jobsetctl logs NAME [-n NS] [--replicated-job R --job-index J --pod-index P] [--follow]``.

Without ``--backend``, ``status``, ``delete`` and ``logs`` find the run whichever backend runs
it (the JobSet, else a native anchor of that name). Every command runs the core's one
lifecycle through its one door (:func:`jobset_core.lifecycle.session`), under
:func:`jobset_core.blocking.run`.

Exit codes: 0 completed (or done), 1 failed (or an error from the cluster, or a queue that
will not run it), 2 invalid input, 3 timeout (of the run, or of its wait for admission), 4
preempted (``--on-preemption retry``: run the same command again to reattach). Connection
settings come from ``--kubeconfig``/``--context``, else ``$KUBECONFIG``
or ``~/.kube/config``, else the in-cluster service account
(:class:`~jobset_core.client.ClientSettings`).

``run`` is idempotent: the JobSet carries an identity label derived from its name and spec
(plus any ``--identity KEY=VALUE``), so running the same file again, e.g. after the first
process was killed, reattaches to the same JobSet instead of creating a second one.

:data:`CLUSTER_COMMANDS` is what :mod:`jobset_core.cli` adds to its table. Nothing here exits
the process.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TextIO

from jobset_core.cli._base import (
    EXIT_COMPLETED,
    EXIT_FAILED,
    EXIT_PREEMPTED,
    EXIT_TIMEOUT,
    Command,
    Streams,
    container_name_argument,
    jobset_name_argument,
    log_pods_argument,
    namespace_argument,
    non_negative_argument,
    positive_argument,
    positive_seconds_argument,
    queue_name_argument,
    seconds_argument,
)
from jobset_core.cli._base import EXIT_RUN_INVALID as EXIT_INVALID
from jobset_core.errors import Problem

if TYPE_CHECKING:
    from jobset_core.lifecycle import Handle, Lifecycle, LogLine, LogOptions, RunRequest, Verdict
    from jobset_core.models import JobSet
    from jobset_core.outcome import Outcome

__all__ = ["CLUSTER_COMMANDS"]

_BACKENDS = ("auto", "controller", "native")
_DELETE_POLICIES = ("never", "on_timeout", "on_success", "always")  # lifecycle.DELETE_POLICIES
#: Exit code of each verdict of ``run``.
_EXIT = {"completed": EXIT_COMPLETED, "timeout": EXIT_TIMEOUT, "preempted": EXIT_PREEMPTED}


# --------------------------------------------------------------------------------------------
# plumbing shared by the commands


def _add_connection(parser: argparse.ArgumentParser, *, with_backend: bool = True) -> None:
    parser.add_argument(
        "-n",
        "--namespace",
        type=namespace_argument,
        help="namespace (default: the file's, else default)",
    )
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube)")
    parser.add_argument("--context", help="kubeconfig context (default: its current-context)")
    if with_backend:
        parser.add_argument(
            "--backend",
            choices=_BACKENDS,
            default="auto",
            help="controller when the JobSet API is served (auto, the default), or native",
        )


@asynccontextmanager
async def _session(args: argparse.Namespace) -> AsyncIterator[Lifecycle]:
    """The lifecycle of every subcommand that talks to the cluster (imported here, on first
    use: ``validate`` and ``render`` start without it)."""
    from jobset_core.lifecycle import ClientSettings, session, settings_spelled_as

    settings = ClientSettings(kubeconfig_path=args.kubeconfig, context=args.context)
    # Messages about where to connect name this CLI's flags, not Python arguments.
    with settings_spelled_as(CLI_SETTINGS):
        async with session(settings) as lifecycle:
            yield lifecycle


#: How the client settings are spelled in this CLI's messages (``None``: no such flag).
CLI_SETTINGS: dict[str, str | None] = {
    "kubeconfig_path": "--kubeconfig",
    "kubeconfig": None,
    "context": "--context",
    "in_cluster": None,
}


def _guard(name: str, work: Callable[[argparse.Namespace, Streams], Awaitable[int]]) -> Any:
    """Run a command through the blocking façade, turning our errors into a message and an
    exit code."""

    def run(args: argparse.Namespace, streams: Streams) -> int:
        import gc

        from jobset_core.blocking import run as blocking_run
        from jobset_core.errors import (
            ConfigError,
            Invalid,
            JobSetError,
            RunEnded,
            SpecError,
            WaitTimeout,
        )

        # The console script starts with cyclic collection off (see cli.script): a command
        # that may wait for hours collects garbage as every long-lived process does, and
        # leaves the collector as it found it.
        collecting = gc.isenabled()
        gc.enable()
        try:
            return blocking_run(lambda: work(args, streams))
        except SpecError as err:
            source = f"{err.source}: " if err.source else ""
            for problem in err.problems:
                _say(streams.err, f"{source}{problem}")
            return EXIT_INVALID
        except Invalid as err:
            _say(streams.err, f"jobsetctl {name}: {err}")
            for problem in err.causes:
                _say(streams.err, f"  {problem}")
            return EXIT_INVALID
        except (ConfigError, ValueError) as err:
            _say(streams.err, f"jobsetctl {name}: {err}")
            return EXIT_INVALID
        except WaitTimeout as err:
            _say(streams.err, f"jobsetctl {name}: {err}")
            return EXIT_TIMEOUT
        except (RunEnded, JobSetError) as err:
            _say(streams.err, f"jobsetctl {name}: {err}")
            return EXIT_FAILED
        except KeyboardInterrupt:
            _say(streams.err, f"jobsetctl {name}: interrupted")
            return 130
        finally:
            if not collecting:
                gc.disable()

    return run


def _say(stream: TextIO, line: str) -> None:
    stream.write(line + "\n")
    stream.flush()


async def _find(lifecycle: Lifecycle, args: argparse.Namespace) -> Handle:
    namespace = args.namespace or "default"
    found = await lifecycle.runs.locate(args.name, namespace=namespace, backend=args.backend)
    return found.handle


# --------------------------------------------------------------------------------------------
# run


def _configure_run(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="YAML/JSON file with one JobSet, or -")
    _add_connection(parser)
    parser.add_argument(
        "--timeout", type=float, metavar="S", help="give up waiting after S seconds (exit 3)"
    )
    parser.add_argument(
        "--follow-logs", action="store_true", help="stream pod logs while waiting (--log-pods)"
    )
    _add_log_options(parser)
    _add_pod_start_options(parser)
    _add_queue_options(parser)
    parser.add_argument(
        "--no-inject-env",
        dest="inject_env",
        action="store_false",
        help="do not give the containers JOBSET_NAME, JOBSET_RESTART_ATTEMPT... (Downward API)",
    )
    parser.add_argument(
        "--delete-policy",
        choices=_DELETE_POLICIES,
        default="never",
        help="delete the JobSet when the run ends: never (default), on_timeout, on_success "
        "(and on timeout), always",
    )
    parser.add_argument(
        "--identity",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an identity label of this run (repeatable; default: a hash of name and spec)",
    )


def _add_log_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("logs (with --follow-logs)")
    group.add_argument(
        "--log-pods",
        default="coordinator",
        type=log_pods_argument,
        metavar="WHICH",
        help="coordinator (default), leaders (pod 0 of each replicated job), all, or a label "
        "selector",
    )
    group.add_argument(
        "--log-container",
        type=container_name_argument,
        metavar="NAME",
        help="only this container's log (default: every container of a pod)",
    )
    group.add_argument(
        "--log-max-pods", type=positive_argument, default=8, metavar="N", help="default 8"
    )
    group.add_argument(
        "--log-max-bytes-per-second",
        type=non_negative_argument,
        default=64 * 1024,
        metavar="B",
        help="lines above this rate are left out and counted (default 65536; 0: no limit)",
    )
    group.add_argument(
        "--log-max-bytes",
        type=non_negative_argument,
        default=16 * 1024 * 1024,
        metavar="B",
        help="stop following after B bytes, saying so (default 16 MiB; 0: no limit)",
    )


def _add_pod_start_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("pods that cannot start")
    group.add_argument(
        "--start-grace",
        type=seconds_argument,
        default=120.0,
        metavar="S",
        help="fail the run when a container waits with ErrImagePull, "
        "CreateContainerConfigError... for longer than S seconds (default 120; 0: at once)",
    )
    group.add_argument(
        "--pending-timeout",
        type=seconds_argument,
        metavar="S",
        help="fail the run when a pod stays unschedulable for S seconds (default: never)",
    )
    group.add_argument(
        "--crash-loop-restarts",
        type=positive_argument,
        metavar="N",
        help="fail the run when a crash-looping container restarted N times (default: never)",
    )


def _add_queue_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("a queue (Kueue; controller backend)")
    group.add_argument(
        "--queue",
        type=queue_name_argument,
        metavar="Q",
        help="run through the LocalQueue Q (the label kueue.x-k8s.io/queue-name; created "
        "suspended, runs once admitted; --timeout then counts only the time admitted)",
    )
    group.add_argument(
        "--priority-class",
        type=queue_name_argument,
        metavar="P",
        help="the Kueue WorkloadPriorityClass of the run",
    )
    group.add_argument(
        "--admission-timeout",
        type=positive_seconds_argument,
        metavar="S",
        help="give up when the queue has not admitted the run within S seconds of its "
        "submission or of an eviction (exit 3)",
    )
    group.add_argument(
        "--on-preemption",
        choices=("wait", "retry", "fail"),
        default="wait",
        help="when the queue preempts the run: wait (default) for its readmission, retry "
        "(exit 4: the same command again reattaches), fail (exit 1)",
    )


def _log_options(args: argparse.Namespace) -> LogOptions | None:
    from jobset_core.lifecycle import log_options

    if not args.follow_logs:
        return None
    return log_options(
        log_pods=args.log_pods,
        log_container=args.log_container,
        log_max_pods=args.log_max_pods,
        log_max_bytes_per_second=args.log_max_bytes_per_second or None,
        log_max_bytes=args.log_max_bytes or None,
    )


def _request(args: argparse.Namespace, streams: Streams) -> RunRequest:
    """The run ``jobsetctl run`` asks for (the flags checked by the core's checks too)."""
    from jobset_core.lifecycle import Deadline, RunRequest, pod_start_rules

    jobset = _load_one(args.file, streams)
    return RunRequest(
        jobset=jobset,
        source="<stdin>" if args.file == "-" else args.file,
        namespace=args.namespace or jobset.metadata.namespace or "default",
        identity=_identity(jobset, args.identity),
        backend=args.backend,
        deadline=Deadline(timeout=args.timeout, admission_timeout=args.admission_timeout),
        pod_start=pod_start_rules(
            start_grace=args.start_grace,
            pending_timeout=args.pending_timeout,
            crash_loop_restarts=args.crash_loop_restarts,
        ),
        delete_policy=args.delete_policy,
        cancel_on_kill=False,  # a killed jobsetctl leaves the run: run it again to adopt
        logs=_log_options(args),
        failed_pod_log_lines=20,
        inject_env=args.inject_env,
        queue=args.queue,
        priority_class=args.priority_class,
        on_preemption=args.on_preemption,
    )


def _load_one(file: str, streams: Streams) -> JobSet:
    from pathlib import Path

    from jobset_core.errors import Problem, SpecError
    from jobset_core.models import load_jobsets, read_stream

    label = "<stdin>" if file == "-" else file
    try:
        jobsets = load_jobsets(read_stream(streams.stdin) if file == "-" else Path(file))
    except SpecError as err:
        raise err.for_a_run(label) from None
    except OSError as err:
        raise SpecError([Problem("", f"cannot read: {err}", "read")], source=label) from None
    if len(jobsets) != 1:
        problem = Problem("", f"expected exactly one JobSet, found {len(jobsets)}", "one")
        raise SpecError([problem], source=label)
    return jobsets[0]


def server_problems(
    args: argparse.Namespace, source: str, jobsets: Sequence[JobSet]
) -> tuple[list[Problem], list[str]]:
    """What the cluster of ``--kubeconfig``/``--context`` says of each JobSet (valid offline)
    in the namespace it would run in, created nowhere (``jobsetctl validate --server``): the
    problems, and what it could not judge.

    Raises:
        JobSetError: the cluster cannot be reached (its words).
    """
    from jobset_core.blocking import run as blocking_run
    from jobset_core.lifecycle import RunRequest

    async def work() -> tuple[list[Problem], list[str]]:
        problems: list[Problem] = []
        unchecked: list[str] = []
        async with _session(args) as lifecycle:
            for index, jobset in enumerate(jobsets):
                request = RunRequest(
                    jobset=jobset,
                    source=source,
                    namespace=args.namespace or jobset.metadata.namespace or "default",
                    identity=_identity(jobset, ()),
                    backend=args.backend,
                )
                checked = await lifecycle.check(request)
                head = f"<document {index}>" if len(jobsets) > 1 else ""
                problems.extend(_under(head, p) for p in checked.problems)
                unchecked.extend(u for u in checked.unchecked if u not in unchecked)
        return problems, unchecked

    return blocking_run(work)


def _under(head: str, problem: Problem) -> Problem:
    if not head:
        return problem
    path = f"{head}.{problem.path}" if problem.path else head
    return Problem(path, problem.message, problem.rule)


def _identity(jobset: JobSet, pairs: Sequence[str]) -> dict[str, str]:
    from jobset_core.identity import spec_fingerprint

    identity = {"spec": spec_fingerprint(jobset)}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--identity expects KEY=VALUE, got {pair!r}")
        identity[key] = value
    return identity


def _summary(outcome: Outcome) -> list[str]:
    head = f"{outcome.phase.value}: JobSet {outcome.namespace}/{outcome.name}"
    lines = [f"{head} restarts={outcome.restarts}"]
    if outcome.reason or outcome.message:
        lines.append(f"  {outcome.reason}: {outcome.message}".rstrip(": "))
    for counts in outcome.replicated_jobs:
        lines.append(
            f"  {counts.name}: replicas={counts.replicas} ready={counts.ready} "
            f"active={counts.active} succeeded={counts.succeeded} failed={counts.failed} "
            f"suspended={counts.suspended}"
        )
    if outcome.duration_seconds is not None:
        lines.append(f"  duration: {outcome.duration_seconds:g}s")
    if outcome.result is not None:
        lines.append(f"  result: {json.dumps(outcome.result)}")
    return lines


async def _run(args: argparse.Namespace, streams: Streams) -> int:
    from jobset_core.lifecycle import Reporter, Submission

    request = _request(args, streams)

    def submitted(submission: Submission) -> None:
        handle = submission.handle
        verb = "created" if submission.created else "adopted"
        _say(
            streams.out,
            f"{verb}: JobSet {request.namespace}/{handle.name} uid={handle.uid} "
            f"backend={handle.backend}",
        )

    def log(line: LogLine) -> None:
        _say(streams.out, f"log: {line.shown()}")

    def judged(verdict: Verdict) -> None:  # said at once: the completion may take a while
        if verdict.kind in ("completed", "failed"):
            for line in _summary(verdict.outcome) if verdict.outcome is not None else []:
                _say(streams.out, line)
        _say(streams.out if verdict.ok else streams.err, f"jobsetctl run: {verdict.message}")

    report = Reporter(
        submitted=submitted,
        progress=lambda p: _say(streams.out, p.line()),
        log=log,
        verdict=judged,
    )
    async with _session(args) as lifecycle:
        finished = await lifecycle.execute(request, report)
    verdict = finished.verdict
    for pod, text in sorted(finished.pod_logs.items()):
        _say(streams.err, f"--- failed pod {pod} (last lines)")
        streams.err.write(text if text.endswith("\n") or not text else text + "\n")
    for problem in finished.problems:  # a refused delete, unreadable logs
        _say(streams.err, f"jobsetctl run: {problem}")
    if finished.deleted:
        _say(
            streams.out,
            f"deleted: JobSet {request.namespace}/{verdict.name} ({args.delete_policy})",
        )
    return _EXIT.get(verdict.kind, EXIT_FAILED)


# --------------------------------------------------------------------------------------------
# status, delete, logs


def _configure_status(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME", type=jobset_name_argument, help="the JobSet's name")
    _add_connection(parser)
    parser.add_argument(
        "-o", "--output", choices=("text", "json"), default="text", help="output format"
    )


async def _status(args: argparse.Namespace, streams: Streams) -> int:
    from jobset_core.policy.outcome import status_document

    async with _session(args) as lifecycle:
        handle = await _find(lifecycle, args)
        outcome, status, queue = await lifecycle.runs.status(handle)
    if args.output == "json":
        document = status_document(status)
        if queue is not None:
            document["queue"] = queue.model_dump(mode="json")
        _say(streams.out, json.dumps(document, indent=2, sort_keys=True))
        return EXIT_COMPLETED
    _say(streams.out, f"backend: {handle.backend} uid: {handle.uid}")
    for line in _summary(outcome):
        _say(streams.out, line)
    if queue is not None:
        _say(streams.out, f"  queue: {queue.line()}")
    return EXIT_COMPLETED


def _configure_delete(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME", type=jobset_name_argument, help="the JobSet's name")
    _add_connection(parser)
    parser.add_argument(
        "--wait", action="store_true", help="wait until the JobSet, Jobs, pods and Service are gone"
    )
    parser.add_argument("--timeout", type=float, metavar="S", help="longest wait (exit 3)")


async def _delete(args: argparse.Namespace, streams: Streams) -> int:
    async with _session(args) as lifecycle:
        handle = await _find(lifecycle, args)
        await lifecycle.runs.delete(handle, wait=args.wait, timeout=args.timeout)
    gone = "deleted" if args.wait else "deletion requested"
    _say(streams.out, f"{gone}: JobSet {handle.namespace}/{handle.name}")
    return EXIT_COMPLETED


def _configure_logs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME", type=jobset_name_argument, help="the JobSet's name")
    _add_connection(parser)
    parser.add_argument("--replicated-job", metavar="R", help="default: coordinator, else first")
    parser.add_argument("--job-index", type=non_negative_argument, default=0, metavar="J")
    parser.add_argument("--pod-index", type=non_negative_argument, default=0, metavar="P")
    parser.add_argument("-f", "--follow", action="store_true", help="stream while it runs")


async def _logs(args: argparse.Namespace, streams: Streams) -> int:
    from jobset_core.lifecycle import LogTarget

    target = LogTarget(args.replicated_job, args.job_index, args.pod_index)
    async with _session(args) as lifecycle:
        handle = await _find(lifecycle, args)
        await lifecycle.runs.read_log(
            handle, target, follow=args.follow, sink=lambda line: _say(streams.out, line.text)
        )
    return EXIT_COMPLETED


# --------------------------------------------------------------------------------------------
# plugging in

_TABLE: tuple[tuple[str, str, Callable[[argparse.ArgumentParser], None], Any], ...] = (
    (
        "run",
        "submit a JobSet, wait and print its progress (0 ok, 1 failed, 2 invalid, 3 timeout)",
        _configure_run,
        _run,
    ),
    (
        "status",
        "show a JobSet's state (-o json: the JobSet status shape)",
        _configure_status,
        _status,
    ),
    ("delete", "delete a JobSet and everything it created", _configure_delete, _delete),
    (
        "logs",
        "print a pod's log (default: the coordinator, else the first pod)",
        _configure_logs,
        _logs,
    ),
)


#: The cluster subcommands, as :class:`~jobset_core.cli._base.Command` entries.
CLUSTER_COMMANDS: tuple[Command, ...] = tuple(
    Command(name=name, help=text, configure=configure, run=_guard(name, work))
    for name, text, configure, work in _TABLE
)
