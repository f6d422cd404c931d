"""The one lifecycle of a JobSet run: submit or adopt → wait → finish, and cancel.

Every way in uses :class:`Run`. A worker-mode operator, ``jobsetctl run`` and a KFP step call
:meth:`Run.execute` (all three steps in one process); a deferrable operator calls
:meth:`Run.submit`, its trigger :meth:`Run.wait` and its resumed task :meth:`Run.finish`; a
sensor calls :meth:`Run.wait` with the phases it waits for. They all watch through the one
observer and are judged by the one :class:`~jobset_core.lifecycle._judge.Judge`, so they reach
the same verdict, with the same message, at the same time.

Cancellation: cancelling :meth:`Run.execute` (a killed task, SIGTERM in a KFP step, Ctrl-C)
sends one DELETE of the run when ``cancel_on_kill`` is set, then lets the cancellation go on.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jobset_core import identity as ident
from jobset_core import pods as podread
from jobset_core.backends._base import (
    BackendChoice,
    BackendProtocol,
    Handle,
    Pass,
    Submission,
)
from jobset_core.backends.auto import locate, make_backend, resolve_kind
from jobset_core.errors import (
    JobSetError,
    ServerError,
    TooManyRequests,
    Unreachable,
    WaitTimeout,
)
from jobset_core.lifecycle._judge import (
    Judge,
    Step,
    WaitRules,
    head_jobset,
    result_note,
    run_result,
)
from jobset_core.lifecycle._logs import (
    FollowControl,
    Follower,
    LogOptions,
    LogSink,
    LogTarget,
    RunCursorStore,
    failed_pod_logs,
    read_log,
    run_follower,
    stop_follower,
)
from jobset_core.lifecycle.verdict import DeletePolicy, Verdict, should_delete
from jobset_core.models import JobSet, JobSetStatus
from jobset_core.observe import Observation, Observer, Tracked
from jobset_core.observe._informer import backoff
from jobset_core.outcome import Backend, Outcome, Progress
from jobset_core.policy import outcome as outcome_rules
from jobset_core.resources import POD

if TYPE_CHECKING:
    from jobset_core.client import Client

__all__ = ["Finished", "ProgressCallback", "Run"]

ProgressCallback = Callable[[Progress], None]

_TRANSIENT = (Unreachable, ServerError, TooManyRequests)
#: After the verdict, how long a log follower may go on to drain its stream (seconds).
LOG_DRAIN_SECONDS = 10.0
#: How long a finished run's waiter gives the observer to see the result's pod end (seconds).
RESULT_GRACE = 15.0
#: How long a run whose pods cannot start waits for the kubelet's Events about the pod to
#: reach the observer, so its message can quote them (seconds; they come with the status).
EVENTS_GRACE = 2.0
#: How long a delete that must leave nothing behind waits for it (seconds).
GONE_TIMEOUT = 120.0
_GONE_POLL = 0.5
#: Judge a little after a grace period ends rather than a little before (seconds).
_RECHECK_SLACK = 0.05


@dataclass(frozen=True)
class Finished:
    """How a run ended, once its delete policy was applied.

    Attributes:
        verdict: How the wait ended.
        created: Whether this call created the run (``False``: adopted, or not submitted
            here).
        deleted: Whether the run was deleted.
        pod_logs: The last lines of each failed pod, by pod name (failures and restarts).
        problems: What went wrong while finishing (a delete that was refused, logs that
            could not be listed): reported, never hiding how the run ended.
    """

    verdict: Verdict
    created: bool = False
    deleted: bool = False
    pod_logs: Mapping[str, str] = field(default_factory=dict)
    problems: tuple[str, ...] = ()


class Run:
    """Runs JobSets on one cluster through one observer.

    Args:
        observer: The observer (its client is the one the run talks through).
        validate: Check every JobSet before creating anything.
        feature_gates: The controller's feature gates, for validation.
        backend_options: More options for the backends (e.g. the native ``placement``).
    """

    def __init__(
        self,
        observer: Observer,
        *,
        validate: bool = True,
        feature_gates: Mapping[str, bool] | None = None,
        backend_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.observer = observer
        self.client: Client = observer.client
        self._options = {
            "validate": validate,
            "feature_gates": dict(feature_gates or {}),
            **dict(backend_options or {}),
        }
        self._backends: dict[Backend, BackendProtocol] = {}

    # ------------------------------------------------------------------ backends

    def backend(self, kind: Backend) -> BackendProtocol:
        """The backend ``kind`` (one per run object)."""
        found = self._backends.get(kind)
        if found is None:
            found = self._backends[kind] = make_backend(self.client, kind, **self._options)
        return found

    async def choose(self, choice: str = "auto") -> BackendProtocol:
        """The backend a choice stands for (``auto``: one discovery request)."""
        resolve_kind(choice, False)  # an unknown choice fails before any request
        served = await self.client.jobset_api_served() if choice == "auto" else False
        return self.backend(resolve_kind(choice, served))

    # ------------------------------------------------------------------ submit

    async def submit(
        self,
        jobset: JobSet,
        *,
        namespace: str,
        identity: Mapping[str, str] | None = None,
        expected_uid: str | None = None,
        backend: BackendChoice | str = "auto",
        inject_env: bool = True,
    ) -> Submission:
        """Create the run, or adopt the one with the same name and identity (a retried or
        resumed task); the answer carries the first status. With ``inject_env`` (default)
        every container gets the workload's variables (``JOBSET_RESTART_ATTEMPT``...:
        :mod:`jobset_core.workload`).

        A run that is being deleted (a timed-out try's) is waited for until it is gone, then
        created again. A created native run gets its first reconcile pass here, so its Jobs
        exist as soon as this returns.

        Raises:
            SpecError: the JobSet is invalid (nothing was created).
            IdentityMismatch: its name is taken by something that is not this run.
        """
        chosen = await self.choose(backend)
        submission = await chosen.submit(
            jobset,
            namespace=namespace,
            identity=identity,
            expected_uid=expected_uid,
            inject_env=inject_env,
        )
        meta = submission.obj.get("metadata") or {}
        if not submission.created and meta.get("deletionTimestamp"):
            await self._wait_gone(chosen, submission.handle, GONE_TIMEOUT)
            submission = await chosen.submit(
                jobset,
                namespace=namespace,
                identity=identity,
                expected_uid=None,
                inject_env=inject_env,
            )
        if submission.created and chosen.kind == "native":
            moved = await self._first_pass(chosen, submission)
            if moved.failure is not None:
                submission = dataclasses.replace(submission, refused=moved.failure)
        return submission

    async def _first_pass(self, backend: BackendProtocol, submission: Submission) -> Pass:
        """The first reconcile pass of a native run just created: nothing of it exists yet."""
        target = backend.target(submission.handle, since=submission.since, seeds=[submission.obj])
        async with self.observer.track(target) as tracked:
            seen = tracked.observation()
            known = Observation(seen.key, anchor=seen.anchor, synced=True, version=seen.version)
            return await backend.drive(
                submission.handle, known, create=True, remember=tracked.remember
            )

    async def locate(
        self,
        name: str,
        *,
        namespace: str,
        backend: BackendChoice | str = "auto",
        uid: str | None = None,
        identity: Mapping[str, str] | None = None,
    ) -> Submission:
        """Find an existing run (``auto``: the JobSet, else a native anchor of that name).

        Raises:
            NotFound: there is none.
            IdentityMismatch: it does not match ``uid`` / ``identity``.
        """
        found, submission = await locate(
            self.client,
            name,
            namespace=namespace,
            choice=backend,
            uid=uid,
            identity=identity,
            **self._options,
        )
        self._backends.setdefault(found.kind, found)
        return submission

    async def find(
        self, *, namespace: str, label_selector: Any, backend: BackendChoice | str = "auto"
    ) -> list[Submission]:
        """Every run in ``namespace`` whose labels match (``auto``: JobSets where the API is
        served, and native runs), by name."""
        resolve_kind(backend, False)
        kinds: list[Backend] = []
        if backend == "auto":
            kinds = ["controller", "native"] if await self.client.jobset_api_served() else []
            kinds = kinds or ["native"]
        else:
            kinds = [resolve_kind(backend, False)]
        found: list[Submission] = []
        for kind in kinds:
            found.extend(
                await self.backend(kind).find(namespace=namespace, label_selector=label_selector)
            )
        return sorted(found, key=lambda s: s.handle.name)

    # ------------------------------------------------------------------ wait

    async def wait(
        self,
        handle: Handle,
        *,
        deadline: float | None = None,
        rules: WaitRules | None = None,
        on_progress: ProgressCallback | None = None,
        logs: LogOptions | None = None,
        on_log: LogSink | None = None,
        submission: Submission | None = None,
    ) -> Verdict:
        """Watch the run until its verdict.

        Args:
            handle: The run.
            deadline: Epoch seconds after which the verdict is ``timeout``.
            rules: What to wait for (restarts handed back, target phases, pod start rules).
            on_progress: Called with each progress event.
            logs: Follow these pods' logs meanwhile (into ``on_log``); with
                :attr:`LogOptions.resume`, from where an earlier follower of the run stopped.
            on_log: Where log lines go.
            submission: The submit that made the run, when this process made it: its
                answer seeds the observer (no extra request for the first status).
        """
        backend = self.backend(handle.backend)
        judge = Judge(handle, rules)
        started = time.monotonic()
        since = submission.since if submission is not None else None
        seeds = [submission.obj] if submission is not None and submission.obj else []
        target = backend.target(handle, since=since, seeds=seeds)
        async with self.observer.track(target) as tracked:
            follower, control = None, FollowControl()
            if logs is not None and on_log is not None:
                follower = asyncio.create_task(self._follow(target, handle, logs, on_log, control))
            try:
                verdict = await self._watch(
                    backend,
                    handle,
                    tracked,
                    judge,
                    deadline=deadline,
                    on_progress=on_progress,
                    refused=submission.refused if submission is not None else None,
                )
            finally:
                if follower is not None:
                    await stop_follower(follower, control, LOG_DRAIN_SECONDS)
        return verdict.model_copy(update={"waited_seconds": time.monotonic() - started})

    async def _follow(
        self,
        target: Any,
        handle: Handle,
        logs: LogOptions,
        sink: LogSink,
        control: FollowControl,
    ) -> None:
        store = RunCursorStore(self.client, handle) if logs.resume else None
        async with self.observer.track(target) as tracked:
            follower = Follower(
                self.client, tracked, handle, logs, sink, control=control, store=store
            )
            await run_follower(follower)

    async def _watch(
        self,
        backend: BackendProtocol,
        handle: Handle,
        tracked: Tracked,
        judge: Judge,
        *,
        deadline: float | None,
        on_progress: ProgressCallback | None,
        refused: tuple[str, str] | None = None,
    ) -> Verdict:
        started = time.monotonic()
        failures = 0
        while True:
            problem = tracked.problem()
            if problem is not None:
                raise problem
            observation = tracked.observation()
            if observation.synced:
                judge.prime(observation)
            try:
                if refused is not None:  # the submit's first pass met it already
                    moved, refused = Pass(failure=refused), None
                else:
                    moved = await backend.drive(
                        handle, observation, create=True, remember=tracked.remember
                    )
                failures = 0
            except _TRANSIENT:
                # The API server is away (the informers reconnect on their own): drive again
                # after a backoff, or sooner when something changes.
                failures += 1
                await tracked.changed(backoff(failures, random.random()))
                continue
            if moved.failure is not None:
                progress, verdict = judge.creation_failed(*moved.failure)
                _report(on_progress, progress)
                return verdict
            if moved.restarted and judge.rules.on_restart == "return":
                # Record the restart (delete the attempt's Jobs) but leave the next attempt
                # to the next wait: the caller hands the restart back first.
                await backend.drive(
                    handle, tracked.observation(), create=False, remember=tracked.remember
                )
            now = time.time()
            step = judge.step(observation if moved.deleted else tracked.observation(), now)
            for progress in step.reports:
                _report(on_progress, progress)
            if step.verdict is not None and not _cleaning_up(handle, step.verdict, moved):
                return await self._settle(
                    backend, handle, tracked, judge, step, moved=moved, deadline=deadline
                )
            if moved.acted:
                continue  # what the pass wrote is observed already: plan the next one
            remaining = None if deadline is None else deadline - now
            if remaining is not None and remaining <= 0:
                return judge.timeout(time.monotonic() - started)
            await tracked.changed(_until_next(remaining, step.recheck_at, now))

    async def _settle(
        self,
        backend: BackendProtocol,
        handle: Handle,
        tracked: Tracked,
        judge: Judge,
        step: Step,
        *,
        moved: Pass,
        deadline: float | None,
    ) -> Verdict:
        """The verdict, once its result is certain and a short TTL (native) was applied (or,
        for pods that cannot start, once the pod's Events are there to quote)."""
        verdict = step.verdict
        assert verdict is not None
        if verdict.pods_cannot_start:
            return await self._with_events(tracked, judge, verdict)
        if verdict.kind in ("completed", "failed") and not verdict.pods_cannot_start:
            verdict = await self._with_result(handle, tracked, verdict)
            if moved.linger is not None and not moved.deleted:
                left = None if deadline is None else deadline - time.time()
                if left is None or moved.linger < left:
                    await asyncio.sleep(moved.linger)
                    await backend.drive(
                        handle, tracked.observation(), create=True, remember=tracked.remember
                    )
        return verdict

    async def _with_events(self, tracked: Tracked, judge: Judge, verdict: Verdict) -> Verdict:
        """A pod that cannot start is decided on its status; the kubelet's Events about it
        come through another watch: give them a moment, then judge again for the message."""
        ends = time.monotonic() + EVENTS_GRACE
        while judge.start_failure is not None and not judge.start_failure.events:
            left = ends - time.monotonic()
            if left <= 0 or not await tracked.changed(left):
                break
            again = judge.step(tracked.observation(), time.time()).verdict
            if again is None or not again.pods_cannot_start:
                break
            verdict = again
        return verdict

    async def _with_result(self, handle: Handle, tracked: Tracked, verdict: Verdict) -> Verdict:
        """The result from the pods the observer holds. When the result's pod has not been
        seen to end yet (its watch event may trail the JobSet's, or its informer may be
        reconnecting), wait a little for the observer to catch up, then list once."""
        outcome = verdict.outcome
        observation = tracked.observation()
        jobset = head_jobset(handle, observation)
        if outcome is None or jobset is None or outcome.result is not None:
            return verdict
        ref = podread.log_pod_target(jobset)
        if ref is None:
            return verdict
        ends = time.monotonic() + RESULT_GRACE
        pods: Sequence[Mapping[str, Any]] = observation.pods
        while True:
            pod = podread.choose_log_pod(pods, ref)
            if pod is not None and _ended(pod):
                break
            left = ends - time.monotonic()
            if left <= 0:
                pods = await self._listed_pods(handle)
                break
            await tracked.changed(left)
            pods = tracked.observation().pods
        result = run_result(jobset, pods)
        if result is None:
            return verdict
        return verdict.model_copy(
            update={
                "outcome": outcome.model_copy(update={"result": result}),
                "message": verdict.message + result_note(jobset, pods),
            }
        )

    async def _listed_pods(self, handle: Handle) -> Sequence[Mapping[str, Any]]:
        selector = ident.jobset_selector(handle.name, handle.uid or None)
        try:
            pods = await self.client.list(POD, namespace=handle.namespace, label_selector=selector)
        except JobSetError:
            return []  # the verdict stands; only its result is unknown
        return pods.items

    # ------------------------------------------------------------------ finish

    async def finish(
        self,
        handle: Handle,
        verdict: Verdict,
        *,
        delete_policy: DeletePolicy = "never",
        pod_log_lines: int = 50,
        wait_gone: bool = False,
        created: bool = False,
    ) -> Finished:
        """Apply the delete policy to a verdict and gather the failed pods' log tails.

        Args:
            handle: The run.
            verdict: How its wait ended.
            delete_policy: When to delete it.
            pod_log_lines: Lines of each failed pod's log to keep (0: none).
            wait_gone: After a delete, wait until nothing of the run is left (so a retry
                never meets the old run being deleted).
            created: Whether this process created the run (reported back).
        """
        logs: dict[str, str] = {}
        problems: list[str] = []
        what = f"JobSet {handle.namespace}/{handle.name}"
        if pod_log_lines > 0 and verdict.kind in ("failed", "restarting"):
            try:
                logs = await failed_pod_logs(self.client, handle, tail_lines=pod_log_lines)
            except JobSetError as error:
                problems.append(f"could not read the failed pods' logs of {what}: {error}")
        deleted = False
        if should_delete(delete_policy, verdict):
            try:
                await self.delete(handle, wait=wait_gone, timeout=GONE_TIMEOUT)
                deleted = True
            except JobSetError as error:
                problems.append(f"could not delete {what}: {error}")
        return Finished(verdict, created, deleted, logs, tuple(problems))

    async def execute(
        self,
        jobset: JobSet,
        *,
        namespace: str,
        identity: Mapping[str, str] | None = None,
        expected_uid: str | None = None,
        backend: BackendChoice | str = "auto",
        inject_env: bool = True,
        deadline: float | None = None,
        rules: WaitRules | None = None,
        delete_policy: DeletePolicy = "never",
        cancel_on_kill: bool = True,
        pod_log_lines: int = 50,
        wait_gone: bool = False,
        on_submit: Callable[[Submission], None] | None = None,
        on_progress: ProgressCallback | None = None,
        logs: LogOptions | None = None,
        on_log: LogSink | None = None,
        on_verdict: Callable[[Verdict], None] | None = None,
    ) -> Finished:
        """Submit (or adopt), wait and finish, in this process.

        ``on_verdict`` hears the verdict the moment the judge gives it, before the finish
        (failed pods' logs, the delete policy) that may take a while.

        Cancelled (the task killed, SIGTERM, Ctrl-C): one DELETE of the run when
        ``cancel_on_kill``, then the cancellation goes on.
        """
        submission = await self.submit(
            jobset,
            namespace=namespace,
            identity=identity,
            expected_uid=expected_uid,
            backend=backend,
            inject_env=inject_env,
        )
        handle = submission.handle
        if on_submit is not None:
            on_submit(submission)
        try:
            verdict = await self.wait(
                handle,
                deadline=deadline,
                rules=rules,
                on_progress=on_progress,
                logs=logs,
                on_log=on_log,
                submission=submission,
            )
        except asyncio.CancelledError:
            if cancel_on_kill:
                await asyncio.shield(self.cancel(handle))
            raise
        except JobSetError:
            if delete_policy == "always":  # whatever happened, even an error mid-wait
                with contextlib.suppress(JobSetError):
                    await self.cancel(handle)
            raise
        if on_verdict is not None:
            on_verdict(verdict)
        return await self.finish(
            handle,
            verdict,
            delete_policy=delete_policy,
            pod_log_lines=pod_log_lines,
            wait_gone=wait_gone,
            created=submission.created,
        )

    # ------------------------------------------------------------------ control

    async def cancel(self, handle: Handle) -> None:
        """One quick DELETE of the run (foreground; everything it created follows)."""
        await self.backend(handle.backend).cancel(handle)

    async def delete(
        self, handle: Handle, *, wait: bool = False, timeout: float | None = None
    ) -> None:
        """Delete the run; with ``wait``, until nothing of it is left.

        Raises:
            WaitTimeout: something was still there after ``timeout`` seconds.
        """
        backend = self.backend(handle.backend)
        await backend.cancel(handle)
        if wait:
            await self._wait_gone(backend, handle, timeout)

    async def _wait_gone(
        self, backend: BackendProtocol, handle: Handle, timeout: float | None
    ) -> None:
        """Until nothing of the run is left: watched through the observer, then confirmed by
        one look at everything (the Service included)."""
        ends = None if timeout is None else time.monotonic() + timeout
        async with self.observer.track(backend.target(handle)) as tracked:
            while True:
                seen = tracked.observation()
                head = seen.anchor if handle.backend == "native" else seen.jobset
                ours = head is not None and (head.get("metadata") or {}).get("uid") == handle.uid
                empty = seen.synced and not ours and not seen.jobs and not seen.pods
                if empty and not await backend.leftovers(handle):
                    return
                left = None if ends is None else ends - time.monotonic()
                if left is not None and left <= 0:
                    verdict = Judge(handle).timeout(timeout or 0.0)
                    message = (
                        f"JobSet {handle.namespace}/{handle.name} was still being deleted "
                        f"after {timeout or 0.0:g}s"
                    )
                    raise WaitTimeout(verdict.model_copy(update={"message": message}))
                await tracked.changed(_GONE_POLL * 4 if empty else left)

    async def set_suspend(self, handle: Handle, suspend: bool) -> None:
        """Suspend (``True``) or resume the run. A native run is driven once, so its Jobs
        follow at once (a waiting process would follow too)."""
        backend = self.backend(handle.backend)
        await backend.set_suspend(handle, suspend)
        if handle.backend == "native":
            await self._drive_once(backend, handle)

    async def _drive_once(self, backend: BackendProtocol, handle: Handle) -> None:
        async with self.observer.track(backend.target(handle)) as tracked:
            while not tracked.observation().synced:
                await tracked.changed(None)
            moved = Pass(acted=True)
            while moved.acted:
                moved = await backend.drive(
                    handle, tracked.observation(), create=True, remember=tracked.remember
                )

    async def read_log(
        self, handle: Handle, target: LogTarget, *, follow: bool, sink: LogSink
    ) -> None:
        """One pod's log into ``sink``: as it is now, or (``follow``) as it is written until
        its container ends (waiting for the pod to start).

        Raises:
            NotFound: the run has no such pod (without ``follow``).
        """
        backend = self.backend(handle.backend)
        if follow:
            options = LogOptions(target=target, max_bytes_per_second=None, max_bytes=None)
            async with self.observer.track(backend.target(handle)) as tracked:
                await Follower(self.client, tracked, handle, options, sink, once=True).run()
            return
        observation = await self.observer.snapshot(backend.target(handle))
        jobset = None if target.replicated_job else head_jobset(handle, observation)
        await read_log(
            self.client, handle, pods=observation.pods, jobset=jobset, target=target, sink=sink
        )

    async def status(self, handle: Handle) -> tuple[Outcome, JobSetStatus]:
        """The run as it stands (one look, no watch): its outcome (with the result once it
        finished) and its status in the JobSet status shape.

        Raises:
            JobSetGone: the run does not exist (or is a namesake with another UID).
        """
        outcome, _, status = await self._look(handle, None)
        return outcome, status

    async def look(
        self, handle: Handle, rules: WaitRules | None = None
    ) -> tuple[Outcome, Verdict | None]:
        """One look at the run (no watch): its outcome, and the verdict a wait with ``rules``
        would give right now (``None`` while it would go on waiting).

        Raises:
            JobSetGone: the run does not exist (or is a namesake with another UID).
        """
        outcome, verdict, _ = await self._look(handle, rules)
        return outcome, verdict

    async def _look(
        self, handle: Handle, rules: WaitRules | None
    ) -> tuple[Outcome, Verdict | None, JobSetStatus]:
        backend = self.backend(handle.backend)
        observation = await self.observer.snapshot(backend.target(handle))
        verdict = Judge(handle, rules).step(observation, time.time()).verdict
        if verdict is not None and verdict.kind == "gone":
            from jobset_core.errors import JobSetGone

            raise JobSetGone(verdict)
        jobset = head_jobset(handle, observation)
        assert jobset is not None
        outcome = outcome_rules.build_outcome(jobset, handle.backend)
        if verdict is not None and verdict.pods_cannot_start and verdict.outcome is not None:
            outcome = verdict.outcome  # failed, although its JobSet is not (yet)
        elif outcome.phase.terminal:
            outcome = outcome.model_copy(update={"result": run_result(jobset, observation.pods)})
        return outcome, verdict, backend.status_of(observation)


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


def _report(on_progress: ProgressCallback | None, progress: Progress | None) -> None:
    if progress is not None and on_progress is not None:
        on_progress(progress)


def _ended(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed"):
        return True
    return any(
        (s.get("state") or {}).get("terminated") is not None
        for s in status.get("containerStatuses") or []
    )
