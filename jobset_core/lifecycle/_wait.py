"""One run's wait: watch it through the observer, drive it (native), judge it, until its verdict.

Waiting has one primitive, :meth:`Tracked.until <jobset_core.observe.Tracked.until>`: wait on
the observer until a condition of the run's observation holds or the time is up. The waits of
the lifecycle are written with it (the Events that explain pods that cannot start, the
result's pod, a run that must be gone, a native run's first sync, a log follower's pods); the
loop below pauses between its passes until the next change or recheck.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from jobset_core import labels as L
from jobset_core import pods as podread
from jobset_core.backends import BackendProtocol, Handle, Pass, Submission
from jobset_core.errors import JobSetError, ServerError, TooManyRequests, Unreachable
from jobset_core.lifecycle._judge import Judge, Step, WaitRules, head_jobset, result_note
from jobset_core.lifecycle._judge import run_result as result_of
from jobset_core.lifecycle._logs import (
    FollowControl,
    Follower,
    LogOptions,
    LogSink,
    RunCursorStore,
    run_follower,
    run_pods,
    stop_follower,
)
from jobset_core.lifecycle.verdict import Verdict
from jobset_core.observe import Kind, Observation, Observer, Target, backoff
from jobset_core.outcome import Progress
from jobset_core.policy.queue import kueue_event
from jobset_core.resources import EVENT

if TYPE_CHECKING:
    from jobset_core.client import Client

__all__ = ["Waiting", "kueue_events", "watch_run"]

T = TypeVar("T")
ProgressCallback = Callable[[Progress], None]

_TRANSIENT = (Unreachable, ServerError, TooManyRequests)
#: After the verdict, how long a log follower may go on to drain its stream (seconds).
LOG_DRAIN_SECONDS = 10.0
#: How long a finished run's waiter gives the observer to see the result's pod end (seconds).
RESULT_GRACE = 15.0
#: How long a run whose pods cannot start waits for the kubelet's Events about the pod to
#: reach the observer, so its message can quote them (seconds; they come with the status).
EVENTS_GRACE = 2.0
#: Judge a little after a grace period ends rather than a little before (seconds).
_RECHECK_SLACK = 0.05
#: Drives a waiter that stays for a short TTL makes at most, to see it applied.
_TTL_DRIVES = 3


@dataclass(frozen=True)
class Waiting:
    """What one wait needs besides the run: its rules, deadline and listeners.

    Attributes:
        rules: What to wait for (its deadline among them).
        logs: Follow these pods' logs meanwhile (into ``on_log``).
        on_log: Where log lines go.
        on_progress: Called with each progress event.
        submission: The submit that made the run, when this process made it (its answer
            seeds the observer: no extra request for the first status).
    """

    rules: WaitRules
    logs: LogOptions | None = None
    on_log: LogSink | None = None
    on_progress: ProgressCallback | None = None
    submission: Submission | None = None


def watch_run(
    observer: Observer, backend: BackendProtocol, handle: Handle, waiting: Waiting
) -> Coroutine[Any, Any, Verdict]:
    """Watch the run until its verdict (following its logs meanwhile, when asked).

    The wait itself, to await: one coroutine frame for the whole wait (a triggerer holds a
    thousand waits, and a frame around it was 0.4 KiB each)."""
    return _Watch(observer, backend, handle, waiting).run()


async def _follow(
    observer: Observer,
    target: Target,
    handle: Handle,
    logs: LogOptions,
    *,
    sink: LogSink,
    control: FollowControl,
) -> None:
    client = observer.client
    store = RunCursorStore(client, handle) if logs.resume else None
    async with observer.track(target) as tracked:
        follower = Follower(client, tracked, handle, logs, sink, control=control, store=store)
        await run_follower(follower)


class _Watch:
    """The loop of one wait: drive (native), judge, wait for a change or a recheck."""

    __slots__ = (
        "_blocked",
        "_failures",
        "_kueue_said",
        "_kueue_version",
        "_refused",
        "backend",
        "handle",
        "judge",
        "observer",
        "tracked",
        "waiting",
    )

    def __init__(
        self, observer: Observer, backend: BackendProtocol, handle: Handle, waiting: Waiting
    ) -> None:
        self.observer, self.backend = observer, backend
        self.handle, self.waiting = handle, waiting
        self.judge = Judge(handle, waiting.rules)
        submission = waiting.submission
        since = submission.since if submission is not None else None
        seeds = [submission.obj] if submission is not None and submission.obj else []
        self.tracked = observer.track(backend.target(handle, since=since, seeds=seeds))
        self._refused = submission.refused if submission is not None else None
        self._failures = 0
        self._blocked = 0
        self._kueue_version: Any = None
        self._kueue_said: tuple[dict[str, Any], ...] = ()

    def _start_follower(self) -> tuple[asyncio.Task[None], FollowControl] | None:
        """Start following the run's logs, when asked."""
        waiting = self.waiting
        if waiting.logs is None or waiting.on_log is None:
            return None
        control = FollowControl()
        target = self.tracked.target
        follower = asyncio.create_task(
            _follow(
                self.observer,
                target,
                self.handle,
                waiting.logs,
                sink=waiting.on_log,
                control=control,
            )
        )
        return follower, control

    def _report(self, progress: Progress | None) -> None:
        if progress is not None and self.waiting.on_progress is not None:
            self.waiting.on_progress(progress)

    def _report_all(self, reports: Iterable[Progress]) -> None:
        for progress in reports:
            self._report(progress)

    async def _drive(self, observation: Observation) -> Pass | None:
        """One drive of the run (``None``: the API server is away; try again later)."""
        if self._refused is not None:  # the submit's first pass met it already
            moved, self._refused = Pass(failure=self._refused), None
            return moved
        try:
            moved = await self.backend.drive(
                self.handle, observation, create=True, remember=self.tracked.remember
            )
        except _TRANSIENT:
            # The informers reconnect on their own: drive again after a backoff, or sooner
            # when something changes.
            self._failures += 1
            await self.tracked.changed(backoff(self._failures, random.random()))
            return None
        self._failures = 0
        return moved

    async def run(self) -> Verdict:
        """The wait: track the run, follow its logs (when asked), and look at each change
        until the verdict; all in this one frame, which is what a waiting task holds."""
        started = time.monotonic()
        tracked, judge = self.tracked, self.judge
        async with tracked:
            following = self._start_follower()
            try:
                while True:
                    problem = tracked.problem()
                    if problem is not None:
                        raise problem
                    observation = tracked.observation()
                    now, recheck_at = time.time(), None
                    # Part of the run is listed (its JobSet, say) and the rest is coming:
                    # nothing is driven or judged from a part. A triggerer's thousand waits
                    # starting together would each look once per kind listed, for nothing.
                    if observation.synced or self._refused is not None:
                        if observation.synced:
                            judge.prime(observation)
                        judge.witness(observation)  # what the drive acts on, even if deleted
                        moved = await self._drive(observation)
                        if moved is None:
                            continue
                        if moved.failure is not None:
                            progress, verdict = judge.creation_failed(*moved.failure)
                            self._report(progress)
                            break
                        if moved.restarted and judge.rules.on_restart == "return":
                            # Record the restart (delete the attempt's Jobs) but leave the
                            # next attempt to the next wait: the caller hands it back first.
                            await self.backend.drive(
                                self.handle,
                                tracked.observation(),
                                create=False,
                                remember=tracked.remember,
                            )
                        seen = await self._kueue_events(
                            observation if moved.deleted else tracked.observation()
                        )
                        now = time.time()
                        step = judge.step(seen, now)
                        self._report_all(step.reports)
                        if step.verdict is not None and not _cleaning_up(
                            self.handle, step.verdict, moved
                        ):
                            verdict = await self._settle(step, moved)
                            break
                        if moved.acted:
                            continue  # what the pass wrote is observed already: plan the next
                        recheck_at = self._blocked_until(moved, step.recheck_at, now)
                        # What this look made is not kept through the wait (a triggerer
                        # holds a thousand): the next look starts from the observer's snapshot.
                        del seen, step, moved
                    del observation
                    # Wait for the run to change, at most until the deadline or the recheck.
                    ends = judge.limit(now).ends_at
                    remaining = None if ends is None else ends - now
                    if remaining is not None and remaining <= 0:
                        verdict = judge.timeout(time.monotonic() - started, now)
                        break
                    await tracked.changed(_until_next(remaining, recheck_at, now))
            finally:
                if following is not None:
                    await stop_follower(*following, LOG_DRAIN_SECONDS)
        return verdict.model_copy(update={"waited_seconds": time.monotonic() - started})

    def _blocked_until(self, moved: Pass, recheck_at: float | None, now: float) -> float | None:
        """The recheck, sooner when a creation met an older run's namesake still going: one
        more pass after a backoff (a Service's going is not watched), none at once."""
        self._blocked = self._blocked + 1 if moved.blocked else 0
        if not self._blocked:
            return recheck_at
        retry_at = now + backoff(self._blocked, random.random())
        return retry_at if recheck_at is None else min(recheck_at, retry_at)

    async def _kueue_events(self, observation: Observation) -> Observation:
        """The observation with Kueue's Events on the JobSet, when this identity may not read
        Workloads and the JobSet is in a queue: listed again whenever the JobSet changed
        (Kueue writes them as it admits, evicts or deactivates the run)."""
        jobset = observation.jobset
        if Kind.WORKLOAD not in observation.forbidden or jobset is None:
            return observation
        meta = jobset.get("metadata") or {}
        if not (meta.get("labels") or {}).get(L.KUEUE_QUEUE):
            return observation
        version = meta.get("resourceVersion")
        if version != self._kueue_version:
            try:
                self._kueue_said = await kueue_events(self.observer.client, self.handle)
            except JobSetError:
                return observation  # the JobSet alone tells queued from admitted
            self._kueue_version = version
        return dataclasses.replace(observation, events=observation.events + self._kueue_said)

    async def _settle(self, step: Step, moved: Pass) -> Verdict:
        """The verdict, once its result is certain and a short TTL (native) was applied (or,
        for pods that cannot start, once the pod's Events are there to quote)."""
        verdict = step.verdict
        assert verdict is not None
        if verdict.pods_cannot_start:
            return await self._with_events(verdict)
        if verdict.kind not in ("completed", "failed"):
            return verdict
        verdict = await self._with_result(verdict)
        if moved.linger is not None and not moved.deleted:
            await self._apply_ttl(moved.linger)
        return verdict

    async def _apply_ttl(self, linger: float) -> None:
        """Stay for a short TTL (native), then drive so that the anchor goes; again while a
        drive still finds time left (the finish its status records came a little later than
        the one the first look read), a few times at most."""
        for _ in range(_TTL_DRIVES):
            now = time.time()
            ends = self.judge.limit(now).ends_at
            if ends is not None and linger >= ends - now:
                return
            await asyncio.sleep(linger)
            moved = await self.backend.drive(
                self.handle, self.tracked.observation(), create=True, remember=self.tracked.remember
            )
            if moved.deleted or moved.linger is None:
                return
            linger = max(moved.linger, _RECHECK_SLACK)

    async def _with_events(self, verdict: Verdict) -> Verdict:
        """A pod that cannot start is decided on its status; the kubelet's Events about it
        come through another watch: give them a moment, then judge again for the message."""
        judge = self.judge
        latest = [verdict]

        def quoted(observation: Observation) -> Verdict | None:
            failure = judge.start_failure
            if failure is None or failure.events:
                return latest[-1]
            again = judge.step(observation, time.time()).verdict
            if again is None or not again.pods_cannot_start:
                return latest[-1]  # it moved on: the words it had stand
            latest.append(again)
            failure = judge.start_failure
            return again if failure is None or failure.events else None

        found = await self.tracked.until(quoted, EVENTS_GRACE)
        return found if found is not None else latest[-1]

    async def _with_result(self, verdict: Verdict) -> Verdict:
        """The result from the pods the observer holds. When the result's pod has not been
        seen to end yet (its watch event may trail the JobSet's, or its informer may be
        reconnecting), wait a little for the observer to catch up, then list once. A failed
        run's pods are being deleted (its unfinished Jobs go): the result's pod may never
        end, so what a list shows now is read without waiting."""
        outcome = verdict.outcome
        jobset = head_jobset(self.handle, self.tracked.observation())
        if outcome is None or jobset is None or outcome.result is not None:
            return verdict
        ref = podread.log_pod_target(jobset)
        if ref is None:
            return verdict

        def ended(observation: Observation) -> Sequence[Mapping[str, Any]] | None:
            pod = podread.choose_log_pod(observation.pods, ref)
            return observation.pods if pod is not None and _ended(pod) else None

        if verdict.kind == "failed":
            pods = ended(self.tracked.observation())
        else:
            pods = await self.tracked.until(ended, RESULT_GRACE)
        if pods is None:
            pods = await self._listed_pods()
        result = result_of(jobset, pods)
        if result is None:
            return verdict
        return verdict.model_copy(
            update={
                "outcome": outcome.model_copy(update={"result": result}),
                "message": verdict.message + result_note(jobset, pods),
            }
        )

    async def _listed_pods(self) -> Sequence[Mapping[str, Any]]:
        try:
            return await run_pods(self.observer.client, self.handle)
        except JobSetError:
            return []  # the verdict stands; only its result is unknown


async def kueue_events(client: Client, handle: Handle) -> tuple[dict[str, Any], ...]:
    """The Events Kueue wrote on the run's JobSet (``Normal`` ones, which the observer's
    Warning Events leave out): what a waiter that may not read Workloads reads instead."""
    fields = f"involvedObject.kind=JobSet,involvedObject.name={handle.name}"
    page = await client.list(EVENT, namespace=handle.namespace, field_selector=fields)
    return tuple(dict(e) for e in page.items if kueue_event(e))


def _cleaning_up(handle: Handle, verdict: Verdict, moved: Pass) -> bool:
    """A native run that just ended still has a pass to make (upstream's finishing stage:
    unfinished Jobs deleted) before its waiter may leave."""
    terminal = verdict.kind in ("completed", "failed") and not verdict.pods_cannot_start
    return handle.backend == "native" and terminal and moved.acted and not moved.finished


def _until_next(remaining: float | None, recheck_at: float | None, now: float) -> float | None:
    """How long to wait for a change: until the deadline, or until a pod's grace period ends
    (a verdict may come then without anything changing)."""
    if recheck_at is None:
        return remaining
    recheck = max(recheck_at - now, 0.0) + _RECHECK_SLACK
    return recheck if remaining is None else min(remaining, recheck)


def _ended(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed"):
        return True
    return any(
        (s.get("state") or {}).get("terminated") is not None
        for s in status.get("containerStatuses") or []
    )
