"""One launch step: the core's run lifecycle, and what the step reports of it.

Library code: :func:`launch` returns a :class:`LaunchResult` for a completed JobSet and raises
the core's typed error for every other ending (:class:`~jobset_core.errors.JobSetFailed`,
:class:`~jobset_core.errors.WaitTimeout`, :class:`~jobset_core.errors.CreationFailed`, ...) or
:class:`Terminated` after SIGTERM; only :mod:`kfp_components.launcher` turns them into exit
codes.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from jobset_core.blocking import cancel_on_signals
from jobset_core.errors import JobSetError
from jobset_core.lifecycle import Handle, Reporter, RunRequest, Submission, error_for
from jobset_core.outcome import Outcome
from jobset_core.resources import POD
from kfp_components._identity import name_as_prefix
from kfp_components._metrics import metric_values, replicated_job_durations
from kfp_components._owner import owned_by, workflow_owner

if TYPE_CHECKING:
    from jobset_core.lifecycle import Lifecycle

__all__ = ["LaunchResult", "Terminated", "launch"]

Say = Callable[[str], None]


class Terminated(BaseException):
    """The process got SIGTERM; the JobSet was asked to be deleted (one DELETE).

    A ``BaseException`` so that no ``except Exception`` on the way swallows it.
    """

    def __init__(self, handle: Handle | None) -> None:
        self.handle = handle
        what = f"JobSet {handle.namespace}/{handle.name}" if handle else "no JobSet yet"
        super().__init__(f"terminated by SIGTERM; {what}{' (DELETE sent)' if handle else ''}")


@dataclass(frozen=True)
class LaunchResult:
    """How a launch step ended with a completed JobSet."""

    outcome: Outcome
    created: bool
    metrics: dict[str, float] = field(default_factory=dict)
    deleted: bool = False


async def _durations(lifecycle: Lifecycle, handle: Handle, say: Say) -> dict[str, float]:
    try:
        jobs = await lifecycle.runs.child_jobs(handle)
    except JobSetError as err:  # metrics are a bonus; the outcome is what counts
        say(f"could not read the child Jobs for durations: {err}")
        return {}
    return replicated_job_durations(jobs)


async def _owned_by_the_run(request: RunRequest, lifecycle: Lifecycle, say: Say) -> RunRequest:
    """The request with its JobSet owned by the pipeline run's ``Workflow``, when this step runs
    in a KFP pod (``KFP_POD_NAME`` / ``KFP_POD_UID``, set by the KFP backend) in the JobSet's
    namespace (an owner must be in the same namespace) and the delete policy lets it go."""
    pod_name, pod_uid = os.environ.get("KFP_POD_NAME", ""), os.environ.get("KFP_POD_UID", "")
    if not pod_name or request.delete_policy == "never" or request.jobset is None:
        return request
    try:
        pod = await lifecycle.client.get(POD, pod_name, namespace=request.namespace)
    except JobSetError as err:  # another namespace, or no right to read it: no owner
        say(f"not owned by the pipeline run (its pod {pod_name} cannot be read: {err})")
        return request
    owner = workflow_owner(pod, pod_uid)
    if owner is None:
        return request
    say(f"owned by Workflow {owner.name}: deleted with the pipeline run")
    return request.but(jobset=owned_by(request.jobset, owner))


async def launch(request: RunRequest, lifecycle: Lifecycle, *, say: Say = print) -> LaunchResult:
    """Run the request's JobSet to a terminal state.

    Creates the JobSet under the name derived from the identity, or adopts the one an earlier
    attempt of the same task created; in a KFP pod, the JobSet is owned by the run's
    ``Workflow`` (see :mod:`kfp_components._owner`). SIGTERM meanwhile sends one DELETE and
    raises :class:`Terminated`.

    Raises:
        JobSetFailed: the JobSet failed.
        WaitTimeout: the timeout passed first (deleted unless the policy is ``never``).
        CreationFailed: a child object cannot be created (as a timeout).
        JobSetGone: the JobSet was deleted meanwhile.
        SpecError: the JobSet is invalid; IdentityMismatch: its name is taken by another run.
    """
    assert request.jobset is not None
    request = request.but(jobset=name_as_prefix(request.jobset))
    request = await _owned_by_the_run(request, lifecycle, say)
    current: list[Handle] = []

    def submitted(submission: Submission) -> None:
        handle = submission.handle
        current.append(handle)
        verb = "created" if submission.created else "adopted (an earlier attempt created it)"
        say(f"JobSet {handle.namespace}/{handle.name} {verb}; uid {handle.uid}; {handle.backend}")

    report = Reporter(
        submitted=submitted,
        progress=lambda event: say(event.line()),
        log=lambda line: say(line.shown()),
        verdict=lambda verdict: say(verdict.message),  # at once, before the completion
    )
    try:
        with cancel_on_signals(signal.SIGTERM):
            finished = await lifecycle.execute(request, report)
    except asyncio.CancelledError:
        raise Terminated(current[-1] if current else None) from None
    verdict = finished.verdict
    for pod, text in sorted(finished.pod_logs.items()):
        say(f"--- last lines of failed pod {pod} ---\n{text.rstrip()}")
    for problem in finished.problems:
        say(problem)
    if finished.deleted:
        say(
            f"deleted JobSet {verdict.namespace}/{verdict.name} "
            f"(delete policy {request.delete_policy}, {verdict.kind})"
        )
    error = error_for(verdict)
    if error is not None:
        raise error
    assert verdict.outcome is not None
    handle = Handle(verdict.name, verdict.namespace, verdict.uid, verdict.backend)
    metrics = metric_values(verdict.outcome, await _durations(lifecycle, handle, say))
    return LaunchResult(verdict.outcome, finished.created, metrics, finished.deleted)
