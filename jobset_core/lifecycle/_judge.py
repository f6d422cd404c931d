"""From observations of one run to progress and, once, a verdict (pure).

:class:`Judge` is the one decision every waiter makes: the worker's wait, the trigger, the
sensor, the KFP step and ``jobsetctl run`` all feed it the observer's
:class:`~jobset_core.observe.Observation` of their run and act on what it says. It reads the
JobSet (for a native run, the JobSet kept on its anchor) through the core's outcome rules, the
run's Warning Events for children that cannot be created, its pods for the result and for pods
that cannot start (:mod:`jobset_core.policy.pod_start`), and its Jobs for why an attempt
failed. Nothing here performs I/O or reads a clock: a time-dependent decision (a start failure
outlasting its grace period) takes the time it is judged at from the caller, and says when it
should be judged again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from jobset_core import pods as podread
from jobset_core.backends import Handle, read_anchor, read_jobset
from jobset_core.errors import JobSetError
from jobset_core.lifecycle.request import Deadline, Limit, OnPreemption
from jobset_core.lifecycle.verdict import Verdict, VerdictKind
from jobset_core.models import JobSet
from jobset_core.models.jobset import JOB_FAILURE_REASONS
from jobset_core.observe import Kind, Observation
from jobset_core.outcome import PODS_CANNOT_START, Outcome, Phase, Progress, result_problem
from jobset_core.policy import outcome as rules
from jobset_core.policy.pod_create import (
    PODS_REFUSED,
    PodCreateCheck,
    PodRefusal,
    check_pod_creates,
    describe_refusal,
    describe_refused,
)
from jobset_core.policy.pod_start import (
    PodStartRules,
    SeenKey,
    StartProblem,
    check_pod_starts,
    describe_failure,
    describe_problem,
)
from jobset_core.policy.queue import ADMISSION_TIMEOUT, Queue, read_queue

__all__ = ["Judge", "Step", "WaitRules", "head_jobset", "result_note", "run_result"]

OnRestart = Literal["continue", "return"]
#: No start problem told about: one object for every judge (each empty set took 0.2 KiB).
_NONE_TOLD: frozenset[tuple[str, str | None, str]] = frozenset()


@dataclass(frozen=True)
class WaitRules:
    """What a waiter waits for.

    Attributes:
        on_restart: ``return``: end the wait when ``status.restarts`` grows past the
            baseline; ``continue``: wait through restarts.
        until: Phases that also end the wait (sensors): verdict ``reached``.
        baseline_restarts: The restarts the caller already saw (default: the first
            observation's).
        deadline: The run's time limits (begun): the running time, the wait for a queue's
            admission, the caller's own limit; the judge says when the wait is over and
            which limit ended it.
        pod_start: When pods that cannot start fail the run (verdict ``failed`` with the
            reason :data:`~jobset_core.outcome.PODS_CANNOT_START`).
        on_preemption: What a preemption by the run's queue does: ``wait`` (go on),
            ``retry`` (verdict ``preempted``), ``fail`` (verdict ``refused``).
    """

    on_restart: OnRestart = "continue"
    until: frozenset[Phase] = frozenset()
    baseline_restarts: int | None = None
    deadline: Deadline = field(default_factory=Deadline)
    pod_start: PodStartRules = field(default_factory=PodStartRules)
    on_preemption: OnPreemption = "wait"


@dataclass(frozen=True)
class Step:
    """What one observation means: a progress event to report (``None``: nothing a user
    sees changed), further events (a pod that cannot start, seen for the first time), when
    the wait is over its verdict, and when to judge again even if nothing changes
    (``recheck_at``, epoch seconds: a start failure's grace period runs out then)."""

    progress: Progress | None = None
    verdict: Verdict | None = None
    notices: tuple[Progress, ...] = ()
    recheck_at: float | None = None

    @property
    def reports(self) -> tuple[Progress, ...]:
        """Every progress event of this step, in order."""
        return ((self.progress,) if self.progress is not None else ()) + self.notices


def head_jobset(handle: Handle, observation: Observation) -> JobSet | None:
    """The run's JobSet: the JobSet resource, or the one its native anchor keeps (parsed once
    for the object the observer holds: to read, never to change)."""
    if handle.backend == "native":
        anchor = observation.anchor
        return read_anchor(anchor).jobset if anchor is not None else None
    found = observation.jobset
    return read_jobset(found) if found is not None else None


def run_result(jobset: JobSet, pods: Iterable[Mapping[str, Any]]) -> Any:
    """The run's result: the termination message of its coordinator pod (else pod 0 of job 0
    of the first replicated job), from the pods the observer holds."""
    target = podread.log_pod_target(jobset)
    if target is None:
        return None
    return podread.termination_result(podread.choose_log_pod(pods, target))


def result_note(jobset: JobSet, pods: Iterable[Mapping[str, Any]]) -> str:
    """What is wrong with the run's result, in words to append to a verdict's message (``""``:
    nothing): a termination message at the kubelet's 4 KiB limit (cut there), or not JSON
    (:func:`~jobset_core.outcome.result_problem`)."""
    target = podread.log_pod_target(jobset)
    if target is None:
        return ""
    pod = podread.choose_log_pod(pods, target)
    found = podread.termination_message(pod)
    if pod is None or found is None:
        return ""
    container, message = found
    problem = result_problem(message, container)
    name = (pod.get("metadata") or {}).get("name")
    return f"; pod {name}: {problem}" if problem else ""


#: How long a restart's verdict may wait for how the failed Job failed (seconds).
RESTART_DETAIL_WAIT = 2.0


def _job_detail(observation: Observation, job: str | None, failures: dict[str, str]) -> str:
    """How the named Job failed: from this observation (the Job, or the Job as its deletion
    showed it), else as an earlier one showed it (a restart deletes the failed Job, and its
    deletion may reach the Job store before the restart reaches the JobSet's)."""
    if not job:
        return ""
    jobs = (*observation.jobs, *reversed(observation.gone_jobs))  # a namesake may be new
    named = (rules.job_failure(j) for j in jobs if j["metadata"].get("name") == job)
    seen = next((failure for failure in named if failure), "") or failures.get(job, "")
    return seen or _job_failure_event(observation, job)


def _job_failure_event(observation: Observation, job: str) -> str:
    """How the named Job failed, from the Job controller's Warning Event about it (kept by the
    observer after the Job itself is gone, and after a relist that never saw it fail)."""
    for event in reversed(observation.events):
        about = event.get("involvedObject") or {}
        reason = event.get("reason")
        if (
            about.get("kind") == "Job"
            and about.get("name") == job
            and reason in JOB_FAILURE_REASONS
        ):
            detail = ": ".join(str(x) for x in (reason, event.get("message")) if x)
            return f"job {job} failed: {detail}"
    return ""


def _versions(objects: Iterable[Mapping[str, Any]]) -> tuple[tuple[str, str], ...] | None:
    """Which versions of which objects these are: ``(name, resourceVersion)`` each (a
    version is never reused for different contents of one object); ``None`` when one has
    no version (it cannot be told from another)."""
    found = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        version = meta.get("resourceVersion")
        if not version:
            return None
        found.append((str(meta.get("name") or ""), str(version)))
    return tuple(found)


def _remember_failures(observation: Observation, failures: dict[str, str]) -> None:
    for job in observation.jobs:
        failure = rules.job_failure(job)
        if failure:
            failures[str(job["metadata"].get("name"))] = failure


def _failed(outcome: Outcome, reason: str, message: str, check: Any) -> Outcome:
    """The outcome of a run whose pods cannot be created or cannot start: failed, although
    its JobSet is not; the first Job (or pod's Job) named."""
    update = {"phase": Phase.FAILED, "terminal_state": "Failed", "reason": reason}
    update |= {"message": message, "failed_job": check.failed[0].job}
    return outcome.model_copy(update=update)


class Judge:
    """Judges successive observations of one run.

    Args:
        handle: The run.
        rules: What the waiter waits for.
    """

    def __init__(self, handle: Handle, rules: WaitRules | None = None) -> None:
        self.handle = handle
        self.rules = rules or WaitRules()
        #: The restarts the wait started from (``status.restarts`` grown past it is a restart).
        self.baseline_restarts: int | None = self.rules.baseline_restarts
        self._shown: tuple[Any, ...] | None = None  # what the last progress event showed
        self._last_restarts: int | None = None
        #: The last outcome, as its JSON without the fields at their defaults: a waiting
        #: task keeps 0.25 KiB (0.5 KiB with them; the model kept 3.2 KiB, its field sets
        #: and counts); it is read back for a verdict only.
        self._last: bytes | None = None
        self._seen: Mapping[SeenKey, float] = {}
        self._refused_seen: Mapping[str, float] = {}
        #: The start problems told about (mostly none).
        self._noticed = _NONE_TOLD
        self._job_failures: dict[str, str] = {}  # Job name -> how it failed, as last seen
        self._restart_seen: dict[int, float] = {}  # restarts -> when first seen, unexplained
        self._looks = 0  # observations judged
        self._pod_views = podread.PodViews()  # an unchanged pod is read once
        #: The Jobs whose failures are remembered, as (name, resourceVersion): not the Jobs
        #: themselves, which the observer keeps packed between looks.
        self._witnessed: tuple[tuple[str, str], ...] | None = ()
        #: The pod (and container) whose start failure gave the verdict, once it did.
        self.start_failure: StartProblem | None = None
        #: What Kueue said of the run at the last observation (``None``: no queue holds it).
        self.queue: Queue | None = None
        self._queue_shown: tuple[Any, ...] | None = None
        self._baseline_preemptions: int | None = None
        self._ran_before: float | None = None  # admitted seconds before this wait began
        self._said_unreadable = False

    @property
    def last(self) -> Outcome | None:
        """The outcome of the last observation judged."""
        return None if self._last is None else Outcome.model_validate_json(self._last)

    # ------------------------------------------------------------------ verdicts

    def verdict(
        self, kind: VerdictKind, outcome: Outcome | None, reason: str, message: str
    ) -> Verdict:
        """A verdict about this run."""
        handle = self.handle
        return Verdict(
            kind=kind,
            name=handle.name,
            namespace=handle.namespace,
            uid=handle.uid,
            backend=handle.backend,
            outcome=outcome,
            reason=reason,
            message=message,
            queue=self.queue,
        )

    def _what(self) -> str:
        return f"JobSet {self.handle.namespace}/{self.handle.name}"

    def gone(self, reason: Literal["Deleted", "Replaced"], detail: str = "") -> Verdict:
        """The run disappeared (or a namesake replaced it)."""
        uid = f" (uid {self.handle.uid})" if self.handle.uid else ""
        words = {"Deleted": "was deleted", "Replaced": "was replaced by a namesake"}[reason]
        message = f"{self._what()}{uid} {words} before it finished"
        return self.verdict("gone", self.last, reason, f"{message}{detail}")

    def limit(self, now: float) -> Limit:
        """When the wait is given up, as the run stood at the last observation."""
        return self.rules.deadline.limit(self.queue, now, ran_before=self._ran_before or 0.0)

    def timeout(self, seconds: float, now: float | None = None) -> Verdict:
        """The deadline passed first (after ``seconds`` of waiting here): the running time,
        the caller's own limit, or the wait for the queue's admission (reason
        ``AdmissionTimeout``)."""
        limit = self.limit(now) if now is not None else Limit(None)
        took = limit.budget if limit.budget is not None else seconds
        shown = f"{round(took):d}" if took >= 10 else f"{round(took, 1):g}"
        queue = self.queue
        if limit.clock == "admission" and queue is not None:
            where = f"LocalQueue {queue.local_queue}" if queue.local_queue else "its queue"
            why = f" (Kueue: {queue.reason}: {queue.message})" if queue.message else ""
            message = f"{self._what()} was not admitted by {where} within {shown}s{why}"
            return self.verdict("timeout", self.last, ADMISSION_TIMEOUT, message)
        message = f"{self._what()} did not finish within {shown}s"
        if limit.clock == "run" and queue is not None:
            message += " of running (time in the queue not counted)"
        return self.verdict("timeout", self.last, "Timeout", message)

    def creation_failed(self, reason: str, message: str) -> tuple[Progress, Verdict]:
        """A child object cannot be created: the progress line and the verdict."""
        last = self.last
        progress = Progress(
            kind="creation-failed",
            phase=last.phase if last else Phase.PENDING,
            restarts=last.restarts if last else 0,
            reason=reason,
            message=message,
        )
        text = f"{self._what()}: {reason}: {message}"
        return progress, self.verdict("creation_failed", last, reason, text)

    def prime(self, observation: Observation) -> None:
        """Take the restart baseline from an observation made before anything was done (when
        the caller gave none): a native waiter drives the run before judging it."""
        if self.baseline_restarts is not None:
            return
        try:
            jobset = head_jobset(self.handle, observation)
        except JobSetError:
            return
        if jobset is not None and jobset.status is not None:
            self.baseline_restarts = jobset.status.restarts or 0
        elif jobset is not None:
            self.baseline_restarts = 0

    # ------------------------------------------------------------------ one observation

    def witness(self, observation: Observation) -> None:
        """Remember how the observed Jobs failed, from an observation that is acted on but not
        judged: the native backend restarts on the observation it drove, and the one judged
        after it may no longer hold the failed Job it deleted."""
        seen = _versions(observation.jobs)
        if seen is None or seen != self._witnessed:  # the same versions of the same Jobs
            _remember_failures(observation, self._job_failures)
            self._witnessed = seen

    def step(self, observation: Observation, now: float | None = None) -> Step:
        """Judge one observation of the run, made at ``now`` (epoch seconds; ``None``: pods
        that cannot start are not judged)."""
        self._looks += 1
        self.witness(observation)
        try:
            jobset = head_jobset(self.handle, observation)
        except JobSetError as error:  # an anchor that no longer parses
            return Step(verdict=self.gone("Replaced", f": {error}"))
        if jobset is None:
            return Step(verdict=self.gone("Deleted")) if observation.synced else Step()
        uid = self.handle.uid
        if uid and jobset.metadata.uid != uid:
            return Step(verdict=self.gone("Replaced"))
        if jobset.metadata.deletion_timestamp and not self._finished(jobset):
            # One that finished first (``ttlSecondsAfterFinished``, or a delete of a finished
            # run seen late) ended as its status says, judged below.
            return Step(verdict=self.gone("Deleted", " (it is being deleted)"))
        failure = self._creation_failure(observation)
        if failure is not None:
            progress, verdict = self.creation_failed(*failure)
            return Step(progress, verdict)
        return self._judge_state(observation, jobset, now)

    def _finished(self, jobset: JobSet) -> bool:
        return rules.build_outcome(jobset, self.handle.backend).phase.terminal

    def _creation_failure(self, observation: Observation) -> tuple[str, str] | None:
        if self.handle.backend != "controller":
            return None  # the native backend sees its own failed creates
        for event in observation.events:
            about = event.get("involvedObject") or {}
            if about.get("kind") != "JobSet":
                continue
            if self.handle.uid and about.get("uid") not in (None, "", self.handle.uid):
                continue  # about an earlier JobSet of the same name
            failure = rules.creation_failure(event)
            if failure is not None:
                return failure
        return None

    def _track(self, outcome: Outcome) -> Progress | None:
        """Remember an observed outcome; the progress event to report when something a user
        sees changed (``None`` otherwise)."""
        self._last = outcome.model_dump_json(exclude_defaults=True).encode()
        if self.baseline_restarts is None:
            self.baseline_restarts = outcome.restarts
        grew = self._last_restarts is not None and outcome.restarts > self._last_restarts
        self._last_restarts = outcome.restarts
        shown = (
            outcome.phase,
            outcome.restarts,
            tuple(tuple(counts.__dict__.values()) for counts in outcome.replicated_jobs),
            outcome.reason,
            outcome.message,
        )
        if shown == self._shown:
            return None
        self._shown = shown
        return Progress(
            kind="restarting" if grew or outcome.phase is Phase.RESTARTING else "status",
            phase=outcome.phase,
            restarts=outcome.restarts,
            replicated_jobs=outcome.replicated_jobs,
            reason=outcome.reason,
            message=outcome.message,
        )

    def _restarted(self, outcome: Outcome) -> bool:
        """Whether the wait ends because the run restarted (``on_restart="return"``)."""
        return (
            self.rules.on_restart == "return"
            and not outcome.phase.terminal
            and outcome.restarts > (self.baseline_restarts or 0)
        )

    def _judge_state(self, observation: Observation, jobset: JobSet, now: float | None) -> Step:
        outcome = rules.build_outcome(jobset, self.handle.backend)
        progress = self._track(outcome)
        queued = self._read_queue(observation, jobset)
        notices = self._queue_notices(outcome)
        if outcome.phase.terminal:
            result = run_result(jobset, observation.pods)
            outcome = outcome.model_copy(update={"result": result})
            kind: VerdictKind = "completed" if outcome.succeeded else "failed"
            message = self._end(outcome)
            if result is not None:
                message += result_note(jobset, observation.pods)
            return Step(progress, self.verdict(kind, outcome, outcome.reason, message), notices)
        queue_verdict = self._judge_queue(outcome)
        if queue_verdict is not None:
            return Step(progress, queue_verdict, notices)
        if self._restarted(outcome):
            outcome, told = self._restart_outcome(observation, jobset, outcome)
            held = None if told else self._hold_restart(outcome.restarts, now)
            if held is not None:
                return Step(progress, notices=notices, recheck_at=held)
            message = self._restart(outcome)
            verdict = self.verdict("restarting", outcome, outcome.reason, message)
            return Step(progress, verdict, notices)
        if outcome.phase in self.rules.until:
            message = f"{self._what()} is {outcome.phase.value}"
            return Step(
                progress, self.verdict("reached", outcome, outcome.reason, message), notices
            )
        if now is None:
            return Step(progress, notices=notices)
        ends = self.limit(now).ends_at
        if ends is not None and now >= ends:  # a one-off look needs no loop to time out
            return Step(progress, self.timeout(0.0, now), notices)
        if outcome.phase is Phase.SUSPENDED or queued:
            return Step(progress, notices=notices, recheck_at=ends)
        step = self._judge_pods(observation, outcome, progress, now)
        recheck = min((t for t in (step.recheck_at, ends) if t is not None), default=None)
        return Step(step.progress, step.verdict, notices + step.notices, recheck)

    # ------------------------------------------------------------------ the queue

    def _read_queue(self, observation: Observation, jobset: JobSet) -> bool:
        """Read what Kueue says of the run (into :attr:`queue`); whether it waits for
        admission (its pods are not judged then: it has none, by design)."""
        if self.handle.backend != "controller":
            return False
        uid = self.handle.uid or jobset.metadata.uid or ""
        readable = Kind.WORKLOAD not in observation.forbidden
        found = read_queue(
            observation.jobset,
            observation.workload_of(uid),
            observation.events,
            workload_readable=readable,
        )
        if found is not None and self._baseline_preemptions is None:
            self._baseline_preemptions = found.preemptions
            self._ran_before = found.past_running
        self.queue = found
        return found is not None and found.status != "admitted"

    def _queue_notices(self, outcome: Outcome) -> tuple[Progress, ...]:
        """A progress line when what Kueue says changed (and, once, that its Workload cannot
        be read)."""
        queue = self.queue
        if queue is None or queue.shown() == self._queue_shown:
            return ()
        before = self._queue_shown
        self._queue_shown = queue.shown()
        evicted = before is not None and queue.evictions > before[-1]
        kind: Any = "preempted" if evicted else queue.status
        out = [
            Progress(
                kind=kind,
                phase=outcome.phase,
                restarts=outcome.restarts,
                reason=queue.reason,
                message=queue.line(),
            )
        ]
        if queue.source == "jobset" and not self._said_unreadable:
            self._said_unreadable = True
            out.append(
                Progress(
                    kind="queued",
                    phase=outcome.phase,
                    restarts=outcome.restarts,
                    reason="WorkloadUnreadable",
                    message=(
                        f"this identity may not read Kueue Workloads in {self.handle.namespace}:"
                        " the queue is read from the JobSet and Kueue's Events on it (grant"
                        " get, list and watch on workloads.kueue.x-k8s.io for Kueue's reasons)"
                    ),
                )
            )
        return tuple(out)

    def _judge_queue(self, outcome: Outcome) -> Verdict | None:
        """A queue that will not run the run, or a preemption the waiter asked to hear of."""
        queue = self.queue
        if queue is None:
            return None
        where = f"LocalQueue {queue.local_queue}" if queue.local_queue else "its queue"
        if queue.refused:
            message = f"{self._what()} will not be run by {where}: {queue.reason}"
            message += f": {queue.message}" if queue.message else ""
            return self.verdict("refused", outcome, queue.reason, message)
        preempted = queue.preemptions > (self._baseline_preemptions or 0)
        if not preempted or self.rules.on_preemption == "wait":
            return None
        detail = f": {queue.last_eviction}" if queue.last_eviction else ""
        count = f"preemption {queue.preemptions}"
        if self.rules.on_preemption == "fail":
            message = f"{self._what()} was preempted by {where} ({count}){detail}"
            return self.verdict("refused", outcome, "Preempted", message)
        message = f"{self._what()} was preempted by {where} ({count}), requeued{detail}"
        return self.verdict("preempted", outcome, "Preempted", message)

    def _judge_pods(
        self, observation: Observation, outcome: Outcome, progress: Progress | None, now: float
    ) -> Step:
        """Pods of the current attempt that cannot be created or cannot start: a notice for
        each new one, and the verdict once one is past its rule (a refusal first)."""
        refused = check_pod_creates(
            observation.jobs,
            observation.pods,
            observation.events,
            now=now,
            attempt=outcome.restarts,
            seen=self._refused_seen,
        )
        self._refused_seen = refused.seen
        check = check_pod_starts(
            self._pod_views.of(observation.pods),
            observation.events,
            self.rules.pod_start,
            now=now,
            attempt=outcome.restarts,
            seen=self._seen,
        )
        self._seen = check.seen
        notices = self._notices(check.problems, refused, outcome, now)
        if refused.failed:
            failed = _failed(outcome, PODS_REFUSED, describe_refused(refused, now=now), refused)
            verdict = self.verdict("failed", failed, PODS_REFUSED, self._end(failed))
            return Step(progress, verdict, notices)
        if not check.failed:
            rechecks = [t for t in (check.recheck_at, refused.recheck_at) if t is not None]
            return Step(progress, notices=notices, recheck_at=min(rechecks, default=None))
        self.start_failure = check.failed[0]
        failed = _failed(outcome, PODS_CANNOT_START, describe_failure(check, now=now), check)
        verdict = self.verdict("failed", failed, PODS_CANNOT_START, self._end(failed))
        return Step(progress, verdict, notices)

    def _notices(
        self,
        problems: tuple[StartProblem, ...],
        refused: PodCreateCheck,
        outcome: Outcome,
        now: float,
    ) -> tuple[Progress, ...]:
        current = {p.key for p in problems} | {r.key for r in refused.refusals}
        # A pod that recovered is told about again if it relapses.
        self._noticed = self._noticed & current or _NONE_TOLD
        out: list[Progress] = []
        told: tuple[PodRefusal | StartProblem, ...] = (*refused.refusals, *problems)
        for problem in told:
            if problem.key in self._noticed or problem.due <= now:
                continue
            self._noticed = self._noticed | {problem.key}
            left = round(problem.due - now)
            if isinstance(problem, StartProblem):
                text, unless = describe_problem(problem, now=now), "it starts"
            else:
                text, unless = describe_refusal(problem, now=now), "its pods are created"
            out.append(
                Progress(
                    kind="cannot-start",
                    phase=outcome.phase,
                    restarts=outcome.restarts,
                    reason=problem.reason,
                    message=f"{text}; the run fails in {left:d}s unless {unless}",
                )
            )
        return tuple(out)

    def _hold_restart(self, restarts: int, now: float | None) -> float | None:
        """Until when the verdict about restart ``restarts`` waits for how its failed Job
        failed (``None``: no longer). The JobSet and its Jobs come on separate watches, so the
        restart may be seen a moment before the Job's failure; a user then gets the why, for
        at most :data:`RESTART_DETAIL_WAIT` more."""
        if now is None or self._looks < 2:  # a one-off look has no later one to wait for
            return None
        due = self._restart_seen.setdefault(restarts, now) + RESTART_DETAIL_WAIT
        return due if now < due else None

    def _restart_outcome(
        self, observation: Observation, jobset: JobSet, outcome: Outcome
    ) -> tuple[Outcome, bool]:
        """A restart's reason, message and failed Job: from the ``RestartingJobSet``
        condition while it is true, else (the new attempt is already up) from the
        controller's Warning Event about the restart; and whether how the failed Job failed
        is known."""
        failed = rules.restart_failed_job(jobset)
        if failed is not None:
            detail = _job_detail(observation, failed, self._job_failures)
            return rules.restart_details(outcome, jobset, detail), bool(detail)
        event = self._restart_event(observation)
        if event is None:
            return rules.restart_details(outcome, jobset), False
        message = str(event.get("message") or "")
        job = rules.failed_job_from_message(message)
        detail = _job_detail(observation, job, self._job_failures)
        told = outcome.model_copy(
            update={
                "phase": Phase.RESTARTING,
                "terminal_state": None,
                "reason": str(event.get("reason") or "Restarting"),
                "message": f"{message}; {detail}" if detail else message,
                "failed_job": job,
            }
        )
        return told, bool(detail)

    def _restart_event(self, observation: Observation) -> Mapping[str, Any] | None:
        for event in reversed(observation.events):
            about = event.get("involvedObject") or {}
            reason = str(event.get("reason") or "")
            restart = reason == "DefaultFailurePolicy" or reason.startswith("FailurePolicy_")
            ours = not self.handle.uid or about.get("uid") in (None, "", self.handle.uid)
            if restart and ours and about.get("kind") == "JobSet":
                return event
        return None

    def _end(self, outcome: Outcome) -> str:
        if outcome.succeeded:
            return f"{self._what()} completed ({outcome.reason or 'Completed'})"
        detail = f": {outcome.message}" if outcome.message else ""
        job = f" (failed child Job: {outcome.failed_job})" if outcome.failed_job else ""
        return f"{self._what()} failed: {outcome.reason or 'Failed'}{detail}{job}"

    def _restart(self, outcome: Outcome) -> str:
        job = f" (failed child Job: {outcome.failed_job})" if outcome.failed_job else ""
        detail = f": {outcome.message}" if outcome.message else ""
        return (
            f"{self._what()} is restarting (restart {outcome.restarts}){job}, "
            f"{outcome.reason or 'RestartJobSet'}{detail}"
        )
