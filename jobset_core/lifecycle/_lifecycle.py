"""The one composition of a run's lifecycle: start → wait → complete.

Every way in enters here with one :class:`~jobset_core.lifecycle.request.RunRequest`:

* worker mode, ``jobsetctl run`` and the KFP step call :meth:`Lifecycle.execute` (all three
  steps in one process, with the one cancellation and error policy);
* a deferrable operator calls :meth:`Lifecycle.start`, defers with the request, its trigger
  calls :meth:`Lifecycle.wait` and its resumed task :meth:`Lifecycle.complete`;
* a sensor calls :meth:`Lifecycle.wait` (with the phases it waits for) on runs it found with
  :attr:`Lifecycle.runs`;
* ``dry_run`` calls :meth:`Lifecycle.prepare`.

They all watch through the one observer and are judged by the one judge, so they reach the
same verdict, with the same message, at the same time.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jobset_core import identity as ident
from jobset_core import labels as L
from jobset_core.backends import BackendProtocol, Handle, Pass, Submission
from jobset_core.errors import JobSetError, Problem, SpecError
from jobset_core.lifecycle._checks import ServerCheck, server_check
from jobset_core.lifecycle._judge import WaitRules
from jobset_core.lifecycle._logs import LogSink, failed_pod_logs
from jobset_core.lifecycle._runs import GONE_TIMEOUT, Backends, Runs
from jobset_core.lifecycle._wait import Waiting, watch_run
from jobset_core.lifecycle.request import NATIVE_QUEUE, RunRequest
from jobset_core.lifecycle.verdict import Verdict, should_delete
from jobset_core.models import JobSet
from jobset_core.observe import Observation, Observer
from jobset_core.outcome import Phase, Progress
from jobset_core.validation import ensure_valid
from jobset_core.workload import inject_workload_env

if TYPE_CHECKING:
    from jobset_core.client import Client

__all__ = ["Finished", "Lifecycle", "Reporter", "Started", "prepare"]


@dataclass(frozen=True)
class Reporter:
    """Who hears what a run does (each optional): its submission, progress events, log
    lines, and the verdict the moment it is given (before the completion, which may take a
    while)."""

    submitted: Callable[[Submission], None] | None = None
    progress: Callable[[Progress], None] | None = None
    log: LogSink | None = None
    verdict: Callable[[Verdict], None] | None = None


_SILENT = Reporter()


@dataclass(frozen=True)
class Started:
    """A started run: the request (its deadline begun) and the submission.

    Attributes:
        request: The request, with :attr:`Deadline.started` set.
        submission: How the run was created or adopted.
    """

    request: RunRequest
    submission: Submission

    @property
    def handle(self) -> Handle:
        """The run."""
        return self.submission.handle

    @property
    def settled(self) -> bool:
        """Whether the verdict is known already (the run was terminal when adopted, or a
        native run's first pass met a child the cluster refuses): a deferrable caller waits
        here rather than defer."""
        submission = self.submission
        return submission.outcome.phase.terminal or submission.refused is not None


@dataclass(frozen=True)
class Finished:
    """How a run ended, once its delete policy was applied.

    Attributes:
        verdict: How the wait ended.
        created: Whether this call created the run (``False``: adopted, or not started
            here).
        deleted: Whether the run was deleted.
        pod_logs: The last lines of each failed pod, by pod name (failures and restarts).
        problems: What went wrong while completing (a delete that was refused, logs that
            could not be listed): reported, never hiding how the run ended.
    """

    verdict: Verdict
    created: bool = False
    deleted: bool = False
    pod_logs: Mapping[str, str] = field(default_factory=dict)
    problems: tuple[str, ...] = ()


def prepare(
    request: RunRequest, *, validate: bool = True, feature_gates: Mapping[str, bool] | None = None
) -> tuple[JobSet, dict[str, str]]:
    """The JobSet as it will be created, and its identity labels: named and labelled for the
    request's identity, given the workload's variables (``inject_env``) and validated; the one
    preparation of a run (what a dry run prints is what is submitted). Pure: no cluster.

    Raises:
        SpecError: the JobSet is invalid (every problem with its field path), or the request
            has none.
    """
    if request.jobset is None:
        raise SpecError([Problem("", "the request has no JobSet to run", "jobset")])
    try:
        named, marks = ident.stamp_identity(request.jobset, request.namespace, request.identity)
        named = queued(named, request)
        if request.inject_env:
            named = inject_workload_env(named)
        if validate:
            ensure_valid(named, feature_gates=feature_gates)
    except SpecError as err:  # every way names the file, and what a run can do of a new field
        raise err.for_a_run(request.source) from None
    return named, marks


_QUEUE_PATH = f"metadata.labels.{L.KUEUE_QUEUE}"


def queued(jobset: JobSet, request: RunRequest) -> JobSet:
    """The JobSet as a queue (Kueue) expects it: labelled with the request's ``queue`` and
    ``priority_class``, and, when it carries a queue label, created suspended (Kueue resumes it
    on admission). Pure.

    Raises:
        SpecError: a label of the JobSet names another queue or priority class than the
            request, or the native backend was asked to run it through a queue.
    """
    labels = dict(jobset.metadata.labels or {})
    problems = []
    for key, wanted, argument in (
        (L.KUEUE_QUEUE, request.queue, "queue"),
        (L.KUEUE_PRIORITY_CLASS, request.priority_class, "priority_class"),
    ):
        if not wanted:
            continue
        if labels.get(key) not in (None, wanted):
            message = f"{labels[key]!r} contradicts {argument}={wanted!r}"
            problems.append(Problem(f"metadata.labels.{key}", message, "queue"))
        labels[key] = wanted
    if labels.get(L.KUEUE_QUEUE) and request.backend == "native":
        problems.append(Problem(_QUEUE_PATH, NATIVE_QUEUE, "queue"))
    if problems:
        raise SpecError(problems)
    if not labels.get(L.KUEUE_QUEUE):
        return jobset if labels == (jobset.metadata.labels or {}) else _relabelled(jobset, labels)
    spec = jobset.spec.model_copy(update={"suspend": True})
    return _relabelled(jobset, labels).model_copy(update={"spec": spec})


def _say_unchecked(checked: ServerCheck, report: Reporter) -> None:
    """Say once what the server could not judge (a missing permission, a webhook that cannot
    take a dry run): the run goes on, checked offline only there."""
    if report.progress is None:
        return
    for line in checked.unchecked:
        report.progress(
            Progress(kind="unchecked", phase=Phase.PENDING, reason="NotChecked", message=line)
        )


def _say_namesake(handle: Handle, report: Reporter) -> None:
    """Say that the start waits for an earlier run of the same name to go (a cleared or
    retried task's, deleted and held by a finalizer or a slow garbage collector)."""
    if report.progress is None:
        return
    message = (
        f"{handle.namespace}/{handle.name} (uid {handle.uid}), an earlier run of this name, "
        "is being deleted: waiting until nothing of it is left, then creating this run"
    )
    report.progress(
        Progress(kind="waiting", phase=Phase.PENDING, reason="NamesakeDeleting", message=message)
    )


def _relabelled(jobset: JobSet, labels: dict[str, str]) -> JobSet:
    return jobset.model_copy(
        update={"metadata": jobset.metadata.model_copy(update={"labels": labels})}
    )


class Lifecycle:
    """Runs JobSets on one cluster through one observer (see the module docs).

    Args:
        observer: The observer (its client is the one the runs talk through).
        validate: Check every JobSet before creating anything (off only to let the server
            judge, in tests).
        server_checks: Dry-run every new run's objects on the cluster before creating
            anything (off only to create what the server would refuse, in tests).
        feature_gates: The controller's feature gates, for validation.
        backend_options: More options for the backends (e.g. the native ``placement``).
    """

    def __init__(
        self,
        observer: Observer,
        *,
        validate: bool = True,
        server_checks: bool = True,
        feature_gates: Mapping[str, bool] | None = None,
        backend_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.observer = observer
        self.client: Client = observer.client
        self._validate = validate
        self._server_checks = server_checks
        self._gates = dict(feature_gates or {})
        self._backends = Backends(self.client, backend_options or {})
        #: What stands on the cluster, beside one run's wait.
        self.runs = Runs(observer, self._backends)

    @property
    def writing(self) -> bool:
        """Whether writes that outlive a verdict are still on their way."""
        return self._backends.writing

    async def flush(self) -> None:
        """Wait for the writes that outlive a verdict (a native run's settled status on its
        way to the anchor): a session of its own does before it closes, a shared one leaves
        them to finish under a lease of the shared client."""
        await self._backends.flush()

    # ------------------------------------------------------------------ start

    async def check(self, request: RunRequest) -> ServerCheck:
        """The run's objects as the target cluster judges them, created nowhere: the one
        preparation, then server-side dry runs (:func:`server_check`) through the backend
        the request chooses. What ``start`` does before its first create, for ``jobsetctl
        validate --server`` and an operator's ``dry_run``.

        Raises:
            SpecError: the JobSet is invalid offline (the server is not asked then).
        """
        prepared, marks = self.prepare(request)
        backend = await self._backends.chosen(request.backend)
        return await server_check(self.client, backend, prepared, marks)

    def prepare(self, request: RunRequest) -> tuple[JobSet, dict[str, str]]:
        """The JobSet as it will be created, and its identity labels (see :func:`prepare`).

        Raises:
            SpecError: the JobSet is invalid, or the request has none.
        """
        return prepare(request, validate=self._validate, feature_gates=self._gates)

    async def start(self, request: RunRequest, report: Reporter = _SILENT) -> Started:
        """Prepare, delete a finished earlier try's run (``replace``), then create the run or
        adopt the one with the same name and identity (a retried or resumed task); the
        answer carries the first status.

        A run that is being deleted (a timed-out try's) is waited for until it is gone, then
        created again. A created native run gets its first reconcile pass here, so its Jobs
        exist as soon as this returns.

        Raises:
            SpecError: the JobSet is invalid, offline or as the cluster judges it (nothing
                was created).
            IdentityMismatch: its name is taken by something that is not this run.
        """
        prepared, marks = self.prepare(request)
        request = request.but(deadline=request.deadline.begin(time.time()))
        if request.replace is not None:
            await self.runs.delete(request.replace, wait=True, timeout=GONE_TIMEOUT)
        backend = await self._backends.chosen(request.backend)
        queue = (prepared.metadata.labels or {}).get(L.KUEUE_QUEUE)
        if queue and backend.kind == "native":  # "auto" chose it: the cluster has no JobSet API
            raise SpecError([Problem(_QUEUE_PATH, NATIVE_QUEUE, "queue")])
        if queue and request.adopt_uid is None:
            await self.runs.check_queue(request.namespace, queue)
        if self._server_checks and request.adopt_uid is None:
            checked = await server_check(self.client, backend, prepared, marks)
            _say_unchecked(checked, report)
            if checked.problems:
                raise SpecError(checked.problems, source=request.source)
        submission = await backend.submit(prepared, marks=marks, expected_uid=request.adopt_uid)
        meta = submission.obj.get("metadata") or {}
        if not submission.created and meta.get("deletionTimestamp"):
            _say_namesake(submission.handle, report)
            await self.runs.wait_gone(submission.handle, GONE_TIMEOUT)
            submission = await backend.submit(prepared, marks=marks)
        if submission.created and backend.kind == "native":
            moved = await self._first_pass(backend, submission)
            if moved.failure is not None:
                submission = dataclasses.replace(submission, refused=moved.failure)
        if report.submitted is not None:
            report.submitted(submission)
        return Started(request, submission)

    async def _first_pass(self, backend: BackendProtocol, submission: Submission) -> Pass:
        """The first reconcile pass of a native run just created: nothing of it exists yet."""
        target = backend.target(submission.handle, since=submission.since, seeds=[submission.obj])
        async with self.observer.track(target) as tracked:
            seen = tracked.observation()
            known = Observation(seen.key, anchor=seen.anchor, synced=True, version=seen.version)
            return await backend.drive(
                submission.handle, known, create=True, remember=tracked.remember
            )

    # ------------------------------------------------------------------ wait

    async def wait(
        self,
        request: RunRequest,
        handle: Handle,
        *,
        report: Reporter = _SILENT,
        submission: Submission | None = None,
        restarts: int | None = None,
    ) -> Verdict:
        """Watch the run until its verdict, with the one cancellation and error policy:
        cancelled (a killed task, SIGTERM, Ctrl-C), one DELETE of the run when the request
        says ``cancel_on_kill``; an error mid-wait with ``delete_policy="always"``, one
        DELETE too; then the cancellation or error goes on.

        Args:
            request: What to wait for (its rules, deadline, logs).
            handle: The run.
            report: Who hears progress and log lines.
            submission: The submit that made the run, when this process made it (it seeds
                the observer).
            restarts: The restarts the caller saw already (the baseline of
                ``on_restart="return"``; default: the first observation's).
        """
        rules = WaitRules(
            on_restart=request.on_restart,
            until=request.until,
            baseline_restarts=restarts,
            deadline=request.deadline.begin(time.time()),
            pod_start=request.pod_start,
            on_preemption=request.on_preemption,
        )
        waiting = Waiting(
            rules=rules,
            logs=request.logs if report.log is not None else None,
            on_log=report.log,
            on_progress=report.progress,
            submission=submission,
        )
        # What the wait needs of the request from here on (a triggerer holds a thousand waits)
        cancel_on_kill, delete_policy = request.cancel_on_kill, request.delete_policy
        del request
        try:
            verdict = await watch_run(
                self.observer, self._backends(handle.backend), handle, waiting
            )
        except asyncio.CancelledError:
            if cancel_on_kill:
                await asyncio.shield(self.runs.cancel(handle))
            raise
        except JobSetError:
            if delete_policy == "always":  # whatever happened, even an error mid-wait
                with contextlib.suppress(JobSetError):
                    await self.runs.cancel(handle)
            raise
        if report.verdict is not None:
            report.verdict(verdict)
        return verdict

    # ------------------------------------------------------------------ complete

    async def complete(
        self, request: RunRequest, handle: Handle, verdict: Verdict, *, created: bool = False
    ) -> Finished:
        """Apply the request's delete policy to a verdict and gather the failed pods' log
        tails (``failed_pod_log_lines``); ``created`` is reported back."""
        logs: dict[str, str] = {}
        problems: list[str] = []
        what = f"JobSet {handle.namespace}/{handle.name}"
        lines = request.failed_pod_log_lines
        if lines > 0 and verdict.kind in ("failed", "restarting"):
            try:
                logs = await failed_pod_logs(self.client, handle, tail_lines=lines)
            except JobSetError as error:
                problems.append(f"could not read the failed pods' logs of {what}: {error}")
        deleted = False
        if should_delete(request.delete_policy, verdict):
            try:
                await self.runs.delete(handle, wait=request.wait_gone, timeout=GONE_TIMEOUT)
                deleted = True
            except JobSetError as error:
                problems.append(f"could not delete {what}: {error}")
        return Finished(verdict, created, deleted, logs, tuple(problems))

    async def execute(self, request: RunRequest, report: Reporter = _SILENT) -> Finished:
        """Start, wait and complete, in this process (see :meth:`wait` for what a
        cancellation or an error mid-wait does)."""
        started = await self.start(request, report)
        verdict = await self.wait(
            started.request, started.handle, report=report, submission=started.submission
        )
        return await self.complete(
            started.request, started.handle, verdict, created=started.submission.created
        )

    async def cancel(self, handle: Handle) -> None:
        """One quick DELETE of the run (a killed task)."""
        await self.runs.cancel(handle)
