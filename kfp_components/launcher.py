"""The launcher: the KFP components' entry points and the only place that ends the process.

:func:`launch_step` and :func:`cleanup_step` are what the component functions call inside the
launcher image; :func:`main` is the same as a command line (``python -m
kfp_components.launcher launch|cleanup ...``) for running a step outside KFP. Library code
below raises typed errors; here they become a message and an exit code (:func:`exit_code`),
so a failed JobSet can never look like a successful step.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, NoReturn, cast

from jobset_core.backends import BACKEND_CHOICES, BackendChoice
from jobset_core.blocking import run
from jobset_core.client.config import ClientSettings, default_namespace
from jobset_core.errors import (
    ApiError,
    ConfigError,
    CreationFailed,
    IdentityMismatch,
    JobSetFailed,
    JobSetGone,
    Problem,
    SpecError,
    WaitTimeout,
)
from jobset_core.lifecycle import (
    DELETE_POLICIES,
    LOG_POD_CHOICES,
    DeletePolicy,
    LogOptions,
    LogTarget,
    check_selector,
)
from jobset_core.models import load_jobset, read_stream
from jobset_core.naming import dns1123_label_errors, ensure_namespace
from jobset_core.policy.pod_start import PodStartRules
from kfp_components._cleanup import CleanupResult, cleanup_run
from kfp_components._identity import checked_run_id, kfp_identity
from kfp_components._launch import LaunchRequest, LaunchResult, Terminated, launch
from kfp_components._struct import from_struct
from kfp_components._task_config import apply_task_config, overrides_from

__all__ = [
    "EXIT_API_ERROR",
    "EXIT_CREATION_FAILED",
    "EXIT_FAILED",
    "EXIT_GONE",
    "EXIT_INVALID",
    "EXIT_TERMINATED",
    "EXIT_TIMEOUT",
    "LaunchOutputs",
    "WaitInputs",
    "check_launch_inputs",
    "cleanup_step",
    "exit_code",
    "launch_outputs",
    "launch_step",
    "main",
]

EXIT_FAILED = 1
EXIT_TIMEOUT = 2
EXIT_CREATION_FAILED = 3
EXIT_INVALID = 4
EXIT_API_ERROR = 5
EXIT_GONE = 6
EXIT_TERMINATED = 143


class LaunchOutputs(NamedTuple):
    """The outputs of ``launch_jobset`` (field names are the KFP output names)."""

    jobset_name: str
    jobset_uid: str
    terminal_state: str
    restarts: int
    result: dict[str, Any]
    backend: str


def exit_code(error: BaseException) -> int | None:
    """The exit code for an error that ends a step; ``None`` for an unexpected one (it
    propagates with its traceback)."""
    table: tuple[tuple[type[BaseException], int], ...] = (
        (Terminated, EXIT_TERMINATED),
        (JobSetFailed, EXIT_FAILED),
        (WaitTimeout, EXIT_TIMEOUT),
        (CreationFailed, EXIT_CREATION_FAILED),
        (JobSetGone, EXIT_GONE),
        (SpecError, EXIT_INVALID),
        (ConfigError, EXIT_INVALID),
        (IdentityMismatch, EXIT_INVALID),
        (ApiError, EXIT_API_ERROR),
    )
    for kind, code in table:
        if isinstance(error, kind):
            return code
    return None


def _fail(error: BaseException) -> NoReturn:
    code = exit_code(error)
    if code is None:
        raise error
    print(f"launch_jobset: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
    sys.exit(code)


def _say(line: str) -> None:
    print(line, flush=True)


def launch_outputs(result: LaunchResult) -> LaunchOutputs:
    """The component outputs of a completed run; a non-object result is wrapped as
    ``{"value": result}`` (KFP output types are fixed), no message gives ``{}``."""
    outcome = result.outcome
    value = outcome.result
    wrapped = value if isinstance(value, dict) else ({} if value is None else {"value": value})
    return LaunchOutputs(
        jobset_name=outcome.name,
        jobset_uid=outcome.uid,
        terminal_state=outcome.terminal_state or "",
        restarts=outcome.restarts,
        result=wrapped,
        backend=outcome.backend,
    )


def _invalid(argument: str, message: str) -> SpecError:
    return SpecError([Problem(argument, message, "kfp-argument")], "launch_jobset")


def _choice(value: str, allowed: Sequence[str], what: str) -> str:
    if value not in allowed:
        raise _invalid(what, f"{value!r} is not one of {', '.join(allowed)}")
    return value


def _namespace_input(value: Any) -> None:
    if not isinstance(value, str):
        raise _invalid("namespace", f"must be a string, not {type(value).__name__}")
    if value:  # "" is the launcher pod's namespace
        try:
            ensure_namespace(value, "namespace")
        except ValueError as err:
            raise _invalid("namespace", str(err)) from None


def _count_input(value: Any, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid(what, f"must be an int >= 0, not {type(value).__name__} {value!r}")
    if value < 0:
        raise _invalid(what, f"must be >= 0, not {value}")


@dataclass(frozen=True)
class WaitInputs:
    """The inputs of ``launch_jobset`` about logs, pods that cannot start and the workload's
    variables (their defaults are the component's)."""

    log_pods: str = "coordinator"
    log_container: str = ""
    log_max_pods: int = 8
    log_max_bytes_per_second: int = 64 * 1024
    log_max_bytes: int = 16 * 1024 * 1024
    start_grace_seconds: float = 120
    pending_timeout_seconds: float = -1
    crash_loop_restarts: int = 0
    inject_env: bool = True

    def pod_start(self) -> PodStartRules:
        """The pod start rules (checked: a bad input names itself).

        Raises:
            SpecError: naming the input.
        """
        for what, value in (
            ("start_grace_seconds", self.start_grace_seconds),
            ("pending_timeout_seconds", self.pending_timeout_seconds),
        ):
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or (value < 0 and value != -1)
            ):
                raise _invalid(
                    what, f"must be a number of seconds >= 0, or -1 (never), not {value!r}"
                )
        _count_input(self.crash_loop_restarts, "crash_loop_restarts")

        def seconds(value: float) -> float | None:
            return None if value == -1 else float(value)

        return PodStartRules(
            seconds(self.start_grace_seconds),
            seconds(self.pending_timeout_seconds),
            self.crash_loop_restarts or None,
        )

    def logs(self, target: LogTarget) -> LogOptions:
        """The log options (checked).

        Raises:
            SpecError: naming the input.
        """
        if not isinstance(self.log_pods, str):
            raise _invalid("log_pods", f"must be a string, not {self.log_pods!r}")
        if self.log_pods not in LOG_POD_CHOICES:
            try:
                check_selector(self.log_pods)
            except ValueError as err:
                raise _invalid("log_pods", str(err)) from None
        if not isinstance(self.log_container, str):
            raise _invalid("log_container", f"must be a string, not {self.log_container!r}")
        if self.log_container and dns1123_label_errors(self.log_container):
            raise _invalid(
                "log_container",
                f"not a container name: {'; '.join(dns1123_label_errors(self.log_container))}",
            )
        _count_input(self.log_max_pods, "log_max_pods")
        if self.log_max_pods < 1:
            raise _invalid("log_max_pods", f"must be >= 1, not {self.log_max_pods}")
        _count_input(self.log_max_bytes_per_second, "log_max_bytes_per_second")
        _count_input(self.log_max_bytes, "log_max_bytes")
        return LogOptions(
            pods=self.log_pods,
            container=self.log_container or None,
            target=target,
            max_pods=self.log_max_pods,
            max_bytes_per_second=self.log_max_bytes_per_second or None,
            max_bytes=self.log_max_bytes or None,
        )

    def checked_inject_env(self) -> bool:
        """``inject_env``, checked.

        Raises:
            SpecError: not a bool.
        """
        if not isinstance(self.inject_env, bool):
            raise _invalid("inject_env", f"must be true or false, not {self.inject_env!r}")
        return self.inject_env


def check_launch_inputs(
    *,
    jobset: Any,
    jobset_dict: Any,
    namespace: Any,
    backend: Any,
    timeout_seconds: Any,
    delete_policy: Any,
    follow_logs: Any,
    log_replicated_job: Any,
    log_job_index: Any,
    log_pod_index: Any,
    task_config_replicated_jobs: Any,
) -> None:
    """Check every input of ``launch_jobset`` before anything is sent to a cluster.

    Raises:
        SpecError: naming the input (the step exits with :data:`EXIT_INVALID`).
    """
    if not isinstance(jobset, str):
        raise _invalid("jobset", f"must be YAML or JSON text, not {type(jobset).__name__}")
    if jobset_dict is not None and not isinstance(jobset_dict, Mapping):
        raise _invalid("jobset_dict", f"must be a dict, not {type(jobset_dict).__name__}")
    if bool(jobset.strip()) == bool(jobset_dict):
        raise _invalid("jobset", "give exactly one of jobset (YAML text) and jobset_dict")
    _namespace_input(namespace)
    _choice(backend, BACKEND_CHOICES, "backend")
    if (
        isinstance(timeout_seconds, bool)
        or not isinstance(timeout_seconds, (int, float))
        or not math.isfinite(timeout_seconds)
        or timeout_seconds < 0
    ):
        raise _invalid(
            "timeout_seconds", f"must be a number >= 0 (0: no limit), not {timeout_seconds!r}"
        )
    _choice(delete_policy, DELETE_POLICIES, "delete_policy")
    if not isinstance(follow_logs, bool):
        raise _invalid("follow_logs", f"must be true or false, not {follow_logs!r}")
    if not isinstance(log_replicated_job, str):
        raise _invalid("log_replicated_job", f"must be a string, not {log_replicated_job!r}")
    _count_input(log_job_index, "log_job_index")
    _count_input(log_pod_index, "log_pod_index")
    if task_config_replicated_jobs is not None and (
        not isinstance(task_config_replicated_jobs, list)
        or not all(isinstance(item, str) for item in task_config_replicated_jobs)
    ):
        raise _invalid(
            "task_config_replicated_jobs",
            f"must be a list of replicated job names, not {task_config_replicated_jobs!r}",
        )


def _run_launch(
    *,
    jobset: str | Mapping[str, Any],
    namespace: str,
    backend: str,
    timeout_seconds: float,
    delete_policy: str,
    logs: LogOptions | None,
    pod_start: PodStartRules,
    inject_env: bool,
    task_config: Any,
    task_config_replicated_jobs: Sequence[str],
    identity: Mapping[str, str],
) -> LaunchResult:
    policy = cast(DeletePolicy, _choice(delete_policy, DELETE_POLICIES, "delete_policy"))
    choice = cast(BackendChoice, _choice(backend, BACKEND_CHOICES, "backend"))
    spec = apply_task_config(
        load_jobset(jobset), overrides_from(task_config), task_config_replicated_jobs
    )
    settings = ClientSettings()
    request = LaunchRequest(
        jobset=spec,
        namespace=namespace or default_namespace(settings),
        identity=identity,
        backend=choice,
        timeout=timeout_seconds if timeout_seconds > 0 else None,
        delete_policy=policy,
        logs=logs,
        pod_start=pod_start,
        inject_env=inject_env,
    )

    async def main() -> LaunchResult:
        from jobset_core.client import Client
        from jobset_core.lifecycle import Run
        from jobset_core.observe import Observer

        async with Client(settings) as client:
            observer = Observer(client, scope="run")
            try:
                return await launch(request, Run(observer), say=_say)
            finally:
                await observer.aclose()

    return run(main)


def launch_step(
    *,
    jobset: str,
    jobset_dict: Mapping[str, Any] | None,
    namespace: str,
    backend: str,
    timeout_seconds: float,
    delete_policy: str,
    follow_logs: bool,
    log_replicated_job: str,
    log_job_index: int,
    log_pod_index: int,
    task_config: Any,
    task_config_replicated_jobs: Sequence[str] | None,
    run_id: str,
    task_name: str,
    task_id: str,
    metrics: Any,
    wait: WaitInputs | None = None,
) -> LaunchOutputs:
    """The body of the ``launch_jobset`` component (see its docstring for the arguments;
    ``wait``: the inputs about logs, pods that cannot start and the workload's variables).

    Logs each metric on ``metrics`` (a KFP ``Metrics`` artifact) and returns the outputs; on
    any failure prints the reason and exits non-zero (:func:`exit_code`).
    """
    try:
        check_launch_inputs(
            jobset=jobset,
            jobset_dict=jobset_dict,
            namespace=namespace,
            backend=backend,
            timeout_seconds=timeout_seconds,
            delete_policy=delete_policy,
            follow_logs=follow_logs,
            log_replicated_job=log_replicated_job,
            log_job_index=log_job_index,
            log_pod_index=log_pod_index,
            task_config_replicated_jobs=task_config_replicated_jobs,
        )
        wait = wait or WaitInputs()
        target = LogTarget(log_replicated_job or None, log_job_index, log_pod_index)
        logs = wait.logs(target) if follow_logs else None
        pod_start, inject_env = wait.pod_start(), wait.checked_inject_env()
        identity = kfp_identity(run_id, task_name, task_id)
        result = _run_launch(
            jobset=from_struct(jobset_dict) if jobset_dict else jobset,
            namespace=namespace,
            backend=backend,
            timeout_seconds=timeout_seconds,
            delete_policy=delete_policy,
            logs=logs,
            pod_start=pod_start,
            inject_env=inject_env,
            task_config=task_config,
            task_config_replicated_jobs=task_config_replicated_jobs or (),
            identity=identity,
        )
    except (Exception, Terminated) as error:
        _fail(error)
    for key, value in result.metrics.items():
        metrics.log_metric(key, value)
    return launch_outputs(result)


def cleanup_step(*, namespace: str, run_id: str, backend: str) -> int:
    """The body of the ``cleanup_jobsets`` component: delete the run's JobSets and native
    anchors; returns how many were deleted (exits non-zero on failure)."""
    try:
        checked = checked_run_id(run_id)
        _namespace_input(namespace)
        choice = cast(BackendChoice, _choice(backend, BACKEND_CHOICES, "backend"))
        settings = ClientSettings()

        async def main() -> CleanupResult:
            from jobset_core.client import Client

            async with Client(settings) as client:
                return await cleanup_run(
                    client,
                    namespace=namespace or default_namespace(settings),
                    run_id=checked,
                    backend=choice,
                )

        done = run(main)
    except Exception as error:
        _fail(error)
    for name in done.jobsets:
        _say(f"deleted JobSet {name}")
    for name in done.anchors:
        _say(f"deleted native anchor {name} (its Jobs and Service follow)")
    _say(f"cleanup of run {run_id}: {done.count} deleted")
    return done.count


class _Metrics:
    """A ``Metrics``-like sink for the command line: collects the values."""

    def __init__(self) -> None:
        self.values: dict[str, float] = {}

    def log_metric(self, key: str, value: float) -> None:
        self.values[key] = value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kfp_components.launcher")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("launch", help="run a JobSet like the launch_jobset component")
    run.add_argument("--jobset", required=True, help="YAML/JSON file of the JobSet")
    run.add_argument("--namespace", default="")
    run.add_argument("--backend", default="auto", choices=BACKEND_CHOICES)
    run.add_argument("--timeout-seconds", type=float, default=0)
    run.add_argument("--delete-policy", default="on_timeout", choices=DELETE_POLICIES)
    run.add_argument("--follow-logs", action="store_true")
    run.add_argument("--log-pods", default="coordinator")
    run.add_argument("--log-container", default="")
    run.add_argument("--start-grace-seconds", type=float, default=120)
    run.add_argument("--pending-timeout-seconds", type=float, default=-1)
    run.add_argument("--crash-loop-restarts", type=int, default=0)
    run.add_argument("--no-inject-env", dest="inject_env", action="store_false")
    run.add_argument("--run-id", required=True)
    run.add_argument("--task-name", required=True)
    run.add_argument("--task-id", required=True)
    run.add_argument("--outputs", help="write the outputs and metrics here as JSON")
    clean = sub.add_parser("cleanup", help="delete every JobSet of a run")
    clean.add_argument("--namespace", default="")
    clean.add_argument("--run-id", required=True)
    clean.add_argument("--backend", default="auto", choices=BACKEND_CHOICES)
    return parser


def _read_jobset_file(path: str) -> str:
    """The text of ``--jobset`` within the input limits (a bad file exits with EXIT_INVALID)."""
    try:
        with Path(path).open("rb") as stream:
            return read_stream(stream)
    except OSError as err:
        _fail(SpecError([Problem("", f"cannot read: {err.strerror}", "read")], path))
    except SpecError as err:
        _fail(SpecError(err.problems, path))


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point; returns 0 or exits with the step's exit code."""
    args = _parser().parse_args(argv)
    if args.command == "cleanup":
        cleanup_step(namespace=args.namespace, run_id=args.run_id, backend=args.backend)
        return 0
    metrics = _Metrics()
    outputs = launch_step(
        jobset=_read_jobset_file(args.jobset),
        jobset_dict=None,
        namespace=args.namespace,
        backend=args.backend,
        timeout_seconds=args.timeout_seconds,
        delete_policy=args.delete_policy,
        follow_logs=args.follow_logs,
        log_replicated_job="",
        log_job_index=0,
        log_pod_index=0,
        task_config=None,
        task_config_replicated_jobs=None,
        run_id=args.run_id,
        task_name=args.task_name,
        task_id=args.task_id,
        metrics=metrics,
        wait=WaitInputs(
            log_pods=args.log_pods,
            log_container=args.log_container,
            start_grace_seconds=args.start_grace_seconds,
            pending_timeout_seconds=args.pending_timeout_seconds,
            crash_loop_restarts=args.crash_loop_restarts,
            inject_env=args.inject_env,
        ),
    )
    if args.outputs:
        document = {"outputs": outputs._asdict(), "metrics": metrics.values}
        Path(args.outputs).write_text(json.dumps(document, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
