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
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, NoReturn, TypeVar

from jobset_core import lifecycle as core
from jobset_core.errors import (
    ApiError,
    ConfigError,
    CreationFailed,
    IdentityMismatch,
    JobSetFailed,
    JobSetGone,
    JobSetPreempted,
    Problem,
    SpecError,
    WaitTimeout,
)
from jobset_core.lifecycle import (
    BACKEND_CHOICES,
    DELETE_POLICIES,
    ClientSettings,
    Deadline,
    InvalidArgument,
    LogOptions,
    LogTarget,
    PodStartRules,
    RunRequest,
    default_namespace,
)
from jobset_core.models import load_jobset, read_stream
from kfp_components._cleanup import CleanupResult, cleanup_run
from kfp_components._identity import checked_run_id, kfp_identity
from kfp_components._launch import LaunchResult, Terminated, launch
from kfp_components._struct import from_struct
from kfp_components._task_config import apply_task_config, overrides_from

__all__ = [
    "EXIT_API_ERROR",
    "EXIT_CREATION_FAILED",
    "EXIT_FAILED",
    "EXIT_GONE",
    "EXIT_INVALID",
    "EXIT_PREEMPTED",
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
#: ``on_preemption="retry"``: Kueue preempted the JobSet; a retry of the step reattaches.
EXIT_PREEMPTED = 7
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
        (JobSetPreempted, EXIT_PREEMPTED),
        (SpecError, EXIT_INVALID),
        (InvalidArgument, EXIT_INVALID),
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


T = TypeVar("T")

#: The component's input names of the request's arguments that it names otherwise.
_INPUTS = {
    "start_grace": "start_grace_seconds",
    "pending_timeout": "pending_timeout_seconds",
    "timeout": "timeout_seconds",
}


def _invalid(argument: str, message: str) -> SpecError:
    return SpecError([Problem(argument, message, "kfp-argument")], "launch_jobset")


def _checked(check: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``check(...)`` with a refusal named by the component's input (the core's words)."""
    try:
        return check(*args, **kwargs)
    except InvalidArgument as err:
        raise _invalid(_INPUTS.get(err.argument, err.argument), err.problem) from None


def _namespace_input(value: Any) -> None:
    if value != "":  # "" is the launcher pod's namespace
        _checked(core.namespace, value)


def _never(value: Any, sentinel: float) -> Any:
    """A KFP number whose ``sentinel`` means "never" (KFP inputs have no None): ``None`` then;
    any other value is the core's to check."""
    return None if value == sentinel and not isinstance(value, bool) else value


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
    queue: str = ""
    priority_class: str = ""
    admission_timeout_seconds: int = 0
    on_preemption: str = "wait"

    def queue_fields(self) -> dict[str, Any]:
        """The queue inputs as the request's fields (checked; ``""`` and 0: none).

        Raises:
            SpecError: naming the input.
        """
        return {
            "queue": _checked(core.queue_name, self.queue, "queue"),
            "priority_class": _checked(core.queue_name, self.priority_class, "priority_class"),
            "on_preemption": _checked(
                core.one_of, self.on_preemption, "on_preemption", core.ON_PREEMPTION
            ),
        }

    def admission_timeout(self) -> float | None:
        """``admission_timeout_seconds`` (checked; 0: no limit).

        Raises:
            SpecError: naming the input.
        """
        given = _never(self.admission_timeout_seconds, 0)
        return _checked(core.seconds, given, "admission_timeout", positive=True)

    def pod_start(self) -> PodStartRules:
        """The pod start rules (checked: a bad input names itself).

        Raises:
            SpecError: naming the input.
        """
        return _checked(
            core.pod_start_rules,
            start_grace=_never(self.start_grace_seconds, -1),
            pending_timeout=_never(self.pending_timeout_seconds, -1),
            crash_loop_restarts=self.crash_loop_restarts or None,
        )

    def logs(self, target: LogTarget) -> LogOptions:
        """The log options (checked; 0 for a byte limit is no limit).

        Raises:
            SpecError: naming the input.
        """
        return _checked(
            core.log_options,
            log_pods=self.log_pods,
            log_container=self.log_container or None,
            log_max_pods=self.log_max_pods,
            log_max_bytes_per_second=self.log_max_bytes_per_second or None,
            log_max_bytes=self.log_max_bytes or None,
            log_replicated_job=target.replicated_job,
            log_job_index=target.job_index,
            log_pod_index=target.pod_index,
        )

    def checked_inject_env(self) -> bool:
        """``inject_env``, checked.

        Raises:
            SpecError: not a bool.
        """
        return _checked(core.flag, self.inject_env, "inject_env")


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
    _checked(core.one_of, backend, "backend", BACKEND_CHOICES)
    _checked(core.seconds, timeout_seconds, "timeout")  # 0: no limit
    _checked(core.one_of, delete_policy, "delete_policy", DELETE_POLICIES)
    _checked(core.flag, follow_logs, "follow_logs")
    if not isinstance(log_replicated_job, str):
        raise _invalid("log_replicated_job", f"must be a string, not {log_replicated_job!r}")
    _checked(core.count, log_job_index, "log_job_index")
    _checked(core.count, log_pod_index, "log_pod_index")
    if task_config_replicated_jobs is not None and (
        not isinstance(task_config_replicated_jobs, list)
        or not all(isinstance(item, str) for item in task_config_replicated_jobs)
    ):
        raise _invalid(
            "task_config_replicated_jobs",
            f"must be a list of replicated job names, not {task_config_replicated_jobs!r}",
        )


def _run_launch(
    request: RunRequest, settings: ClientSettings, task_config: Any, rjobs: Sequence[str]
) -> LaunchResult:
    assert request.jobset is not None
    spec = apply_task_config(request.jobset, overrides_from(task_config), rjobs)
    request = request.but(jobset=spec)
    return core.blocking(settings, lambda lifecycle: launch(request, lifecycle, say=_say))


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
        logs = wait.logs(LogTarget(log_replicated_job or None, log_job_index, log_pod_index))
        pod_start, inject_env = wait.pod_start(), wait.checked_inject_env()
        identity = kfp_identity(run_id, task_name, task_id)
        settings = ClientSettings()
        source = "launch_jobset(jobset_dict)" if jobset_dict else "launch_jobset(jobset)"
        try:
            loaded = load_jobset(from_struct(jobset_dict) if jobset_dict else jobset)
        except SpecError as err:
            raise err.for_a_run(source) from None
        request = RunRequest(
            jobset=loaded,
            source=source,
            namespace=namespace or default_namespace(settings),  # "": the launcher pod's
            identity=identity,
            backend=backend,  # type: ignore[arg-type]  # checked above
            deadline=Deadline(
                timeout=timeout_seconds or None, admission_timeout=wait.admission_timeout()
            ),
            pod_start=pod_start,
            delete_policy=delete_policy,  # type: ignore[arg-type]  # checked above
            logs=logs if follow_logs else None,
            failed_pod_log_lines=30,
            inject_env=inject_env,
            **wait.queue_fields(),
        )
        result = _run_launch(request, settings, task_config, task_config_replicated_jobs or ())
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
        choice: Any = _checked(core.one_of, backend, "backend", BACKEND_CHOICES)
        settings = ClientSettings()

        async def main(lifecycle: core.Lifecycle) -> CleanupResult:
            return await cleanup_run(
                lifecycle,
                namespace=namespace or default_namespace(settings),
                run_id=checked,
                backend=choice,
            )

        done = core.blocking(settings, main)
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
    run.add_argument("--queue", default="")
    run.add_argument("--priority-class", default="")
    run.add_argument("--admission-timeout-seconds", type=int, default=0)
    run.add_argument("--on-preemption", default="wait")
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
            queue=args.queue,
            priority_class=args.priority_class,
            admission_timeout_seconds=args.admission_timeout_seconds,
            on_preemption=args.on_preemption,
        ),
    )
    if args.outputs:
        document = {"outputs": outputs._asdict(), "metrics": metrics.values}
        Path(args.outputs).write_text(json.dumps(document, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
