"""What the lifecycle does with runs as they stand on a cluster, beside one run's wait: find
them, look at them, delete them, suspend or resume them, read their logs.

:class:`Runs` is reached as :attr:`Lifecycle.runs <jobset_core.lifecycle.Lifecycle.runs>`;
sensors, ``jobsetctl status|delete|logs``, the KFP cleanup and the lifecycle itself (a stale
run deleted before a new try) use it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from jobset_core import identity as ident
from jobset_core import labels as L
from jobset_core import naming
from jobset_core import pods as podread
from jobset_core.backends import (
    BackendChoice,
    BackendProtocol,
    Handle,
    Pass,
    Submission,
    anchor_events,
    kinds_for,
    locate,
    make_backend,
)
from jobset_core.errors import (
    ApiError,
    Forbidden,
    JobSetError,
    JobSetGone,
    NotFound,
    Problem,
    SpecError,
    WaitTimeout,
)
from jobset_core.lifecycle._judge import Judge, WaitRules, head_jobset, run_result
from jobset_core.lifecycle._logs import (
    Follower,
    LogOptions,
    LogSink,
    LogTarget,
    read_log,
    unreadable,
)
from jobset_core.lifecycle._wait import kueue_events
from jobset_core.lifecycle.verdict import Verdict
from jobset_core.lifecycle.view import LOG_LINES, ZONE_LABEL, build_view, slice_keys
from jobset_core.models import JobSet, JobSetStatus
from jobset_core.observe import Kind, Observation, Observer
from jobset_core.outcome import Backend, Outcome
from jobset_core.policy import outcome as outcome_rules
from jobset_core.policy.queue import Queue
from jobset_core.resources import JOB, JOBSET, LOCAL_QUEUE, SERVICE, ApiResource

if TYPE_CHECKING:
    from jobset_core.client import Client

__all__ = ["Backends", "Runs", "Standing"]

#: The most pods whose log tails, and nodes whose zones, one picture reads.
PICTURE_LOGS = 64
PICTURE_NODES = 64
#: Requests one picture has in flight at most.
_PICTURE_CONCURRENCY = 8
#: How long a delete that must leave nothing behind waits for it (seconds).
GONE_TIMEOUT = 120.0
#: How often a run that looks gone is confirmed by a look at everything (seconds).
_GONE_CONFIRM = 2.0


class Standing(NamedTuple):
    """A run as it stands (:meth:`Runs.status`).

    Attributes:
        outcome: Its outcome (with the result once it finished).
        status: Its status in the JobSet status shape.
        queue: What its queue (Kueue) says of it (``None``: no queue holds it).
    """

    outcome: Outcome
    status: JobSetStatus
    queue: Queue | None = None


class Backends:
    """The backends of one client, one instance per kind, with their options."""

    def __init__(self, client: Client, options: Mapping[str, Any]) -> None:
        self.client = client
        self._options = dict(options)
        self._made: dict[Backend, BackendProtocol] = {}

    def __call__(self, kind: Backend) -> BackendProtocol:
        """The backend ``kind``."""
        found = self._made.get(kind)
        if found is None:
            found = self._made[kind] = make_backend(self.client, kind, **self._options)
        return found

    @property
    def writing(self) -> bool:
        """Whether a backend's drive left a write going after its verdict."""
        return any(backend.writing for backend in self._made.values())

    async def flush(self) -> None:
        """Wait for what the backends' drives left going after their verdicts."""
        for backend in list(self._made.values()):
            await backend.flush()

    async def chosen(self, choice: str) -> BackendProtocol:
        """The backend a choice stands for (``auto``: one discovery request)."""
        return self((await kinds_for(self.client, choice))[0])

    async def located(
        self,
        name: str,
        *,
        namespace: str,
        choice: str,
        uid: str | None,
        identity: Mapping[str, str] | None,
    ) -> Submission:
        found, submission = await locate(
            self.client,
            name,
            namespace=namespace,
            choice=choice,
            uid=uid,
            identity=identity,
            **self._options,
        )
        self._made.setdefault(found.kind, found)
        return submission


class Runs:
    """Runs on one cluster through one observer, as they stand.

    Args:
        observer: The observer (its client is the one the runs are reached through).
        backends: The backends of that client.
    """

    def __init__(self, observer: Observer, backends: Backends) -> None:
        self.observer = observer
        self.client: Client = observer.client
        self.backend = backends

    async def jobset_api_served(self) -> bool:
        """Whether the cluster serves ``jobset.x-k8s.io/v1alpha2`` (``auto`` means the
        controller backend there)."""
        return await self.client.jobset_api_served()

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
        await self.backend.flush()  # what this process decided reads as decided
        return await self.backend.located(
            name, namespace=namespace, choice=backend, uid=uid, identity=identity
        )

    async def find(
        self, *, namespace: str, label_selector: Any, backend: BackendChoice | str = "auto"
    ) -> list[Submission]:
        """Every run in ``namespace`` whose labels match (``auto``: JobSets where the API is
        served, and native runs), by name."""
        await self.backend.flush()
        found: list[Submission] = []
        for kind in await kinds_for(self.client, backend):
            found.extend(
                await self.backend(kind).find(namespace=namespace, label_selector=label_selector)
            )
        return sorted(found, key=lambda s: s.handle.name)

    async def status(self, handle: Handle) -> Standing:
        """The run as it stands (one look, no watch): its outcome (with the result once it
        finished), its status in the JobSet status shape, and what its queue says.

        Raises:
            JobSetGone: the run does not exist (or is a namesake with another UID).
        """
        return (await self._look(handle, None))[0]

    async def look(
        self, handle: Handle, rules: WaitRules | None = None
    ) -> tuple[Outcome, Verdict | None]:
        """One look at the run (no watch): its outcome, and the verdict a wait with ``rules``
        would give right now (``None`` while it would go on waiting).

        Raises:
            JobSetGone: the run does not exist (or is a namesake with another UID).
        """
        standing, verdict = await self._look(handle, rules)
        return standing.outcome, verdict

    async def _look(
        self, handle: Handle, rules: WaitRules | None
    ) -> tuple[Standing, Verdict | None]:
        backend = self.backend(handle.backend)
        await self.backend.flush()  # a settled end this process gave reads as its verdict
        observation = await self.observer.snapshot(backend.target(handle))
        if Kind.WORKLOAD in observation.forbidden and observation.jobset is not None:
            with contextlib.suppress(JobSetError):  # the JobSet alone still says a lot
                said = await kueue_events(self.client, handle)
                observation = dataclasses.replace(observation, events=observation.events + said)
        judge = Judge(handle, rules)
        verdict = judge.step(observation, time.time()).verdict
        if verdict is not None and verdict.kind == "gone":
            raise JobSetGone(verdict)
        jobset = head_jobset(handle, observation)
        assert jobset is not None
        outcome = outcome_rules.build_outcome(jobset, handle.backend)
        if verdict is not None and verdict.pods_cannot_start and verdict.outcome is not None:
            outcome = verdict.outcome  # failed, although its JobSet is not (yet)
        elif outcome.phase.terminal:
            outcome = outcome.model_copy(update={"result": run_result(jobset, observation.pods)})
        return Standing(outcome, backend.status_of(observation), judge.queue), verdict

    async def check_queue(self, namespace: str, queue: str) -> None:
        """The cluster's word on a queue before a run is created in it: Kueue must serve
        LocalQueues and this one must exist in ``namespace`` (else Kueue holds the JobSet
        for ever). An identity that may not read LocalQueues is not stopped: the run's
        Workload says the same later.

        Raises:
            SpecError: Kueue is not served, or the LocalQueue does not exist.
        """
        path = f"metadata.labels.{L.KUEUE_QUEUE}"
        try:
            await self.client.get(LOCAL_QUEUE, queue, namespace=namespace)
        except NotFound as error:
            if error.details.get("name") == queue:
                problem = (
                    f"LocalQueue {queue!r} does not exist in namespace {namespace!r}: Kueue "
                    "would hold the JobSet for ever (create it, or name another queue)"
                )
            else:
                problem = (
                    f"the cluster does not serve Kueue's {LOCAL_QUEUE.api_version} API: "
                    f"nothing would ever admit a JobSet queued in {queue!r}"
                )
            raise SpecError([Problem(path, problem, "queue")]) from None
        except Forbidden:
            return

    async def child_jobs(self, handle: Handle) -> list[Mapping[str, Any]]:
        """The run's child Jobs as they stand (one list; not a namesake's)."""
        selector = ident.jobset_selector(handle.name, handle.uid or None)
        found = await self.client.list(JOB, namespace=handle.namespace, label_selector=selector)
        return list(found.items)

    async def picture(
        self,
        handle: Handle,
        *,
        log_lines: int = LOG_LINES,
        max_logs: int = PICTURE_LOGS,
        max_nodes: int = PICTURE_NODES,
        objects: bool = True,
        observation: Observation | None = None,
    ) -> dict[str, Any]:
        """The run as a person looks at it (:func:`~jobset_core.lifecycle.view.build_view`):
        one look at its objects, the zones and slices of (at most ``max_nodes``) nodes its
        pods run on, and the last ``log_lines`` lines of (at most ``max_logs``) pods' logs,
        failed pods first; with ``objects``, also the JobSet as submitted and its Service (one
        read each). What this identity may not read is said in the picture's ``notes``.
        ``observation``: the run as a watch of it keeps it (``None``: one look now).

        Raises:
            JobSetGone: the run does not exist (or is a namesake with another UID).
        """
        backend = self.backend(handle.backend)
        if observation is None:
            await self.backend.flush()
            observation = await self.observer.snapshot(backend.target(handle))
        jobset = head_jobset(handle, observation)
        head = observation.anchor if handle.backend == "native" else observation.jobset
        uid = str(((head or {}).get("metadata") or {}).get("uid") or "")
        if jobset is None or head is None or (handle.uid and uid != handle.uid):
            raise JobSetGone(Judge(handle).gone("Replaced" if head is not None else "Deleted"))
        spec = jobset.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
        status = backend.status_of(observation).model_dump(
            mode="json", by_alias=True, exclude_none=True
        )
        events = list(observation.events)
        if handle.backend == "native":  # it emits none: the anchor keeps upstream's
            events = anchor_events(head) + events
        notes = [f"{kind.value}: forbidden" for kind in sorted(observation.forbidden, key=str)]
        gate = asyncio.Semaphore(_PICTURE_CONCURRENCY)
        submitted = await self._submitted(handle, jobset, notes) if objects else None
        keys = {ZONE_LABEL, *slice_keys(submitted or {}).values()}
        network = jobset.spec.network
        wanted = objects and (network is None or network.enable_dns_hostnames is not False)
        service_name = naming.subdomain(jobset) if wanted else ""  # "": none asked for
        service, nodes, logs = await asyncio.gather(
            self._read(SERVICE, service_name, handle.namespace, notes) if wanted else _none(),
            self._nodes(observation.pods, keys, max_nodes, gate, notes),
            self._tails(
                handle, observation.pods, lines=log_lines, most=max_logs, gate=gate, notes=notes
            ),
        )
        return build_view(
            backend=handle.backend,
            head=head,
            spec=spec,
            status=status,
            pods=observation.pods,
            events=events,
            logs=logs,
            notes=notes,
            log_lines=log_lines,
            workload=observation.workload_of(uid) if handle.backend == "controller" else None,
            submitted=submitted,
            jobs=observation.jobs,
            service=service,
            service_name=service_name,
            node_labels=nodes,
        )

    async def _read(
        self, resource: ApiResource, name: str, namespace: str, notes: list[str]
    ) -> dict[str, Any] | None:
        """One object, or ``None`` (absent; or forbidden, said in ``notes``)."""
        try:
            return await self.client.get(resource, name, namespace=namespace)
        except NotFound:
            return None
        except Forbidden:
            notes.append(f"{resource.plural}: forbidden")
            return None

    async def _submitted(self, handle: Handle, jobset: JobSet, notes: list[str]) -> dict[str, Any]:
        """The JobSet as submitted, with its pod templates (the observer keeps none): the
        native anchor's copy, or the JobSet read once (what the observer holds, if it cannot
        be)."""
        if handle.backend == "controller":
            found = await self._read(JOBSET, handle.name, handle.namespace, notes)
            if found is not None:
                return found
        return jobset.model_dump(mode="json", by_alias=True, exclude_none=True)

    async def _nodes(
        self,
        pods: Any,
        keys: set[str],
        most: int,
        gate: asyncio.Semaphore,
        notes: list[str],
    ) -> dict[str, dict[str, str]]:
        """The labels named by ``keys`` of (at most ``most``) nodes the pods run on."""
        names = sorted({n for p in pods if (n := (p.get("spec") or {}).get("nodeName"))})
        if most and len(names) > most:
            notes.append(f"nodes: the labels of {len(names) - most} nodes were not read")

        async def labels_of(name: str) -> tuple[str, dict[str, str] | None]:
            async with gate:
                try:
                    node = await self.client.node(name)
                except Forbidden:
                    return name, None
                except NotFound:
                    return name, {}
            found = (node.get("metadata") or {}).get("labels") or {}
            return name, {k: str(found[k]) for k in keys if k in found}

        read = await asyncio.gather(*(labels_of(n) for n in names[:most]))
        if any(found is None for _, found in read):
            notes.append("nodes: forbidden (no zones or slices)")
        return {name: found for name, found in read if found}

    async def _tails(
        self,
        handle: Handle,
        pods: Any,
        *,
        lines: int,
        most: int,
        gate: asyncio.Semaphore,
        notes: list[str],
    ) -> dict[str, str]:
        views = [podread.PodView.of(p) for p in pods]
        started = [v for v in views if any(s.started for s in v.container_statuses)]
        started.sort(key=lambda v: (not v.failed, v.completion_index or 0, v.name))
        if most and len(started) > most:
            notes.append(f"logs: the logs of {len(started) - most} pods were not read")

        async def tail(view: podread.PodView) -> tuple[str, str]:
            container = podread.pod_container(view.raw)
            async with gate:
                try:
                    text = await self.client.read_pod_log(
                        view.name,
                        namespace=handle.namespace,
                        container=container,
                        tail_lines=lines,
                    )
                except NotFound:
                    text = "<the log can no longer be read: the pod or its container is gone>"
                except ApiError as error:
                    text = f"<the log cannot be read: {unreadable(error)}>"
            return view.name, text

        return dict(await asyncio.gather(*(tail(v) for v in started[:most])))

    # ------------------------------------------------------------------ control

    async def cancel(self, handle: Handle) -> None:
        """One quick DELETE of the run (foreground; everything it created follows)."""
        await self.backend(handle.backend).cancel(handle)

    async def delete(
        self, handle: Handle, *, wait: bool = False, timeout: float | None = GONE_TIMEOUT
    ) -> None:
        """Delete the run; with ``wait``, until nothing of it is left.

        Raises:
            WaitTimeout: something was still there after ``timeout`` seconds.
        """
        await self.cancel(handle)
        if wait:
            await self.wait_gone(handle, timeout)

    async def wait_gone(self, handle: Handle, timeout: float | None) -> None:
        """Until nothing of the run is left: watched through the observer, then confirmed by
        one look at everything (the Service included).

        Raises:
            WaitTimeout: something was still there after ``timeout`` seconds.
        """
        backend = self.backend(handle.backend)
        ends = None if timeout is None else time.monotonic() + timeout

        def empty(seen: Observation) -> bool | None:
            head = seen.anchor if handle.backend == "native" else seen.jobset
            ours = head is not None and (head.get("metadata") or {}).get("uid") == handle.uid
            return (seen.synced and not ours and not seen.jobs and not seen.pods) or None

        async with self.observer.track(backend.target(handle)) as tracked:
            while True:
                left = None if ends is None else max(0.0, ends - time.monotonic())
                if await tracked.until(empty, left) and not await backend.leftovers(handle):
                    return
                if ends is not None and time.monotonic() >= ends:
                    raise WaitTimeout(_still_there(handle, timeout or 0.0))
                await tracked.changed(_GONE_CONFIRM)  # a Service goes without an event here

    async def set_suspend(self, handle: Handle, suspend: bool) -> None:
        """Suspend (``True``) or resume the run. A native run is driven once, so its Jobs
        follow at once (a waiting process would follow too)."""
        backend = self.backend(handle.backend)
        await backend.set_suspend(handle, suspend)
        if handle.backend == "native":
            await self.drive_once(backend, handle)

    async def drive_once(self, backend: BackendProtocol, handle: Handle) -> None:
        """Drive a native run until a pass does nothing (once its objects were listed)."""
        async with self.observer.track(backend.target(handle)) as tracked:
            await tracked.until(lambda seen: seen.synced or None, None)
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


def _still_there(handle: Handle, timeout: float) -> Verdict:
    verdict = Judge(handle).timeout(timeout)
    message = f"JobSet {handle.namespace}/{handle.name} was still being deleted after {timeout:g}s"
    return verdict.model_copy(update={"message": message})


async def _none() -> None:
    return None
