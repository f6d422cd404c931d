"""One launch step: submit (or adopt) the task's JobSet, follow it, end as the policy says.

Library code: every way the step can end is a value (:class:`LaunchResult`) or a typed error
(:class:`JobSetFailed`, :class:`~jobset_core.errors.WaitTimeout`, ...); only
:mod:`kfp_components.launcher` turns errors into exit codes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from jobset_core import backends as common
from jobset_core.backends import BackendProtocol, Handle
from jobset_core.errors import CreationFailed, JobSetError, NotFound, WaitTimeout
from jobset_core.models import JobSet
from jobset_core.outcome import Outcome, Progress
from kfp_components._identity import name_as_prefix
from kfp_components._metrics import metric_values, replicated_job_durations
from kfp_components._signals import cancel_on_sigterm

__all__ = [
    "DELETE_POLICIES",
    "DeletePolicy",
    "Ending",
    "JobSetFailed",
    "LaunchRequest",
    "LaunchResult",
    "LogTarget",
    "launch",
    "should_delete",
]

#: When the step deletes its JobSet. SIGTERM (run terminated) always deletes.
DeletePolicy = Literal["never", "on_timeout", "on_success", "always"]
DELETE_POLICIES: tuple[str, ...] = get_args(DeletePolicy)
#: How the step ended: the JobSet completed or failed; the step gave up on a JobSet that is
#: still running (timeout, a child object the controller cannot create); or another error.
Ending = Literal["completed", "failed", "gave_up", "error"]

_DELETES: dict[str, frozenset[str]] = {
    "never": frozenset(),
    "on_timeout": frozenset({"gave_up"}),
    "on_success": frozenset({"completed", "gave_up"}),
    "always": frozenset({"completed", "failed", "gave_up", "error"}),
}
_LOG_DRAIN_SECONDS = 5.0


def should_delete(policy: DeletePolicy, ending: Ending) -> bool:
    """Whether ``policy`` deletes the JobSet when the step ends as ``ending``.

    ``never`` keeps everything (a retry reattaches to a timed-out JobSet); ``on_timeout``
    deletes only what the step gave up on; ``on_success`` also deletes completed runs and keeps
    failed ones to debug; ``always`` deletes whatever happened.

    Raises:
        ValueError: an unknown policy.
    """
    if policy not in _DELETES:
        raise ValueError(f"unknown delete policy {policy!r}; use one of {', '.join(_DELETES)}")
    return ending in _DELETES[policy]


@dataclass(frozen=True)
class LogTarget:
    """Whose log to follow: ``replicated_job`` (default: the coordinator, else the first
    replicated job), ``job_index`` and ``pod_index``."""

    replicated_job: str | None = None
    job_index: int = 0
    pod_index: int = 0


@dataclass(frozen=True)
class LaunchRequest:
    """What one launch step does.

    Attributes:
        jobset: The JobSet (its ``metadata.name`` becomes the prefix of the derived name).
        namespace: Where to run it.
        identity: The task's identity (see :func:`kfp_components._identity.kfp_identity`).
        timeout: Seconds to wait for a terminal state (``None``: no limit).
        delete_policy: When to delete the JobSet (see :func:`should_delete`).
        logs: Follow this pod's log while waiting (``None``: do not).
    """

    jobset: JobSet
    namespace: str
    identity: Mapping[str, str]
    timeout: float | None = None
    delete_policy: DeletePolicy = "on_timeout"
    logs: LogTarget | None = None


@dataclass(frozen=True)
class LaunchResult:
    """How a launch step ended with a completed JobSet."""

    outcome: Outcome
    created: bool
    metrics: dict[str, float] = field(default_factory=dict)
    deleted: bool = False


class JobSetFailed(JobSetError):
    """The JobSet reached ``Failed``: the step must fail.

    Attributes:
        outcome: The failed run (reason, message, failed Job, counts).
        pod_logs: The last lines of each failed pod, by pod name.
    """

    def __init__(self, outcome: Outcome, pod_logs: Mapping[str, str] | None = None) -> None:
        self.outcome = outcome
        self.pod_logs = dict(pod_logs or {})
        detail = ": ".join(p for p in (outcome.reason, outcome.message) if p)
        job = f" (failed job {outcome.failed_job})" if outcome.failed_job else ""
        super().__init__(
            f"JobSet {outcome.namespace}/{outcome.name} failed"
            f"{': ' + detail if detail else ''}{job}; restarts={outcome.restarts}"
        )


Say = Callable[[str], None]
ListJobs = Callable[[Handle], list[dict[str, Any]]]


def _follow_logs(backend: BackendProtocol, handle: Handle, target: LogTarget, say: Say) -> None:
    who = target.replicated_job or "coordinator"
    prefix = f"[{who}-{target.job_index}-{target.pod_index}] "
    try:
        for line in backend.stream_logs(
            handle,
            replicated_job=target.replicated_job,
            job_index=target.job_index,
            pod_index=target.pod_index,
            follow=True,
        ):
            say(prefix + line.rstrip("\n"))
    except JobSetError as err:
        say(f"{prefix}log stream ended: {err}")


def _durations(handle: Handle, list_jobs: ListJobs | None, say: Say) -> dict[str, float]:
    if list_jobs is None:
        return {}
    try:
        return replicated_job_durations(list_jobs(handle))
    except JobSetError as err:  # metrics are a bonus; the outcome is what counts
        say(f"could not read the child Jobs for durations: {err}")
        return {}


def _failed_pod_logs(backend: BackendProtocol, handle: Handle, say: Say) -> dict[str, str]:
    try:
        return backend.failed_pod_logs(handle, tail_lines=30)
    except JobSetError as err:
        say(f"could not read the failed pods' logs: {err}")
        return {}


def _end(
    backend: BackendProtocol, handle: Handle, policy: DeletePolicy, ending: Ending, say: Say
) -> bool:
    if not should_delete(policy, ending):
        return False
    try:
        backend.delete(handle)
    except NotFound:
        return False
    except JobSetError as err:  # never hides how the step ended
        say(f"could not delete JobSet {handle.namespace}/{handle.name}: {err}")
        return False
    say(f"deleted JobSet {handle.namespace}/{handle.name} (delete policy {policy}, {ending})")
    return True


def launch(
    request: LaunchRequest,
    backend: BackendProtocol,
    *,
    list_jobs: ListJobs | None = None,
    say: Say = print,
) -> LaunchResult:
    """Run the request's JobSet to a terminal state on ``backend``.

    Creates the JobSet under the name derived from the identity, or adopts the one an earlier
    attempt of the same task created. SIGTERM meanwhile sends one DELETE and raises
    :class:`~kfp_components._signals.Terminated`.

    Args:
        request: What to run.
        backend: Where (a sync backend).
        list_jobs: Reads the run's child Jobs, for per-replicated-job durations.
        say: Where progress lines go.

    Raises:
        JobSetFailed: the JobSet failed.
        WaitTimeout: the timeout passed first (deleted unless the policy is ``never``).
        CreationFailed: the controller cannot create a child object (as a timeout).
        SpecError: the JobSet is invalid; IdentityMismatch: its name is taken by another run.
    """
    jobset = name_as_prefix(request.jobset)
    name = common.resolve_name(jobset, request.identity)
    current: list[Handle] = [Handle(name, request.namespace, "", backend.kind)]
    with cancel_on_sigterm(backend, lambda: current[-1]):
        submission = backend.submit(jobset, namespace=request.namespace, identity=request.identity)
        handle = submission.handle
        current.append(handle)
        verb = "created" if submission.created else "adopted (an earlier attempt created it)"
        say(f"JobSet {handle.namespace}/{handle.name} {verb}; uid {handle.uid}; {backend.kind}")
        return _follow(
            request,
            backend=backend,
            handle=handle,
            created=submission.created,
            list_jobs=list_jobs,
            say=say,
        )


def _follow(
    request: LaunchRequest,
    *,
    backend: BackendProtocol,
    handle: Handle,
    created: bool,
    list_jobs: ListJobs | None,
    say: Say,
) -> LaunchResult:
    logs = None
    if request.logs is not None:
        logs = threading.Thread(
            target=_follow_logs, args=(backend, handle, request.logs, say), daemon=True
        )
        logs.start()

    def progress(event: Progress) -> None:
        say(event.line())

    policy = request.delete_policy
    try:
        outcome = backend.wait(handle, timeout=request.timeout, on_progress=progress)
    except (WaitTimeout, CreationFailed):
        _end(backend, handle, policy, "gave_up", say)
        raise
    except NotFound:
        raise
    except JobSetError:
        _end(backend, handle, policy, "error", say)
        raise
    if logs is not None:
        logs.join(_LOG_DRAIN_SECONDS)
    metrics = metric_values(outcome, _durations(handle, list_jobs, say))
    if not outcome.succeeded:
        pod_logs = _failed_pod_logs(backend, handle, say)
        for pod, text in sorted(pod_logs.items()):
            say(f"--- last lines of failed pod {pod} ---\n{text.rstrip()}")
        _end(backend, handle, policy, "failed", say)
        raise JobSetFailed(outcome, pod_logs)
    deleted = _end(backend, handle, policy, "completed", say)
    return LaunchResult(outcome, created, metrics, deleted)
