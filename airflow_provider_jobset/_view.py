"""The data of the JobSet view of a task instance, framework-free apart from the hook.

:func:`parse_query` checks what the page asks for (clear errors for bad input);
:func:`connection_of` turns what the task try recorded about its connection into a hook (the
view reads the cluster through the task's own connection, never a kubeconfig file named by
the task); :class:`Pictures` finds the task try's run by its identity labels (either backend)
and reads its picture, one read per run and few seconds however many people look.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_jobset._identity import TaskIdentity
from jobset_core.errors import JobSetGone
from jobset_core.identity import identity_labels

if TYPE_CHECKING:
    from jobset_core.lifecycle import ClientSettings, Handle, Lifecycle
    from jobset_core.observe import Tracked

__all__ = [
    "Pictures",
    "Recorded",
    "Watches",
    "connection_of",
    "parse_query",
    "parse_run_query",
    "read_picture",
    "summarize",
]

_NOT_CREATED = "this task instance has not created a JobSet (yet)"
#: How long one picture is served to every viewer before the cluster is read again (seconds).
FRESH_FOR = 3.0
_MAX_ID = 250


class _BadQuery(ValueError):  # never raised out of the view: a 400 answer
    """What the page asked for is not a task instance."""


def parse_query(params: Mapping[str, str]) -> TaskIdentity:
    """The task instance the page asks for: ``dag_id``, ``run_id``, ``task_id`` and
    ``map_index`` (absent, empty, ``-1`` or the UI's unfilled ``{MAP_INDEX}``: not mapped).

    Raises:
        _BadQuery: a parameter is missing, too long or not a number.
    """
    found: dict[str, str] = {}
    for key in ("dag_id", "run_id", "task_id"):
        value = str(params.get(key) or "")
        if not value:
            raise _BadQuery(f"{key} is required")
        if len(value) > _MAX_ID:
            raise _BadQuery(f"{key} is longer than {_MAX_ID} characters")
        found[key] = value
    raw = str(params.get("map_index") or "").strip()
    if raw in ("", "{MAP_INDEX}"):
        index = -1
    else:
        try:
            index = int(raw)
        except ValueError:
            raise _BadQuery(f"map_index must be a whole number, not {raw[:40]!r}") from None
        if index < -1:
            raise _BadQuery(f"map_index must be -1 or more, not {index}")
    return TaskIdentity(found["dag_id"], found["task_id"], found["run_id"], index)


def parse_run_query(params: Mapping[str, str]) -> tuple[str, str]:
    """``(dag_id, run_id)`` of the DAG run the summary asks for.

    Raises:
        _BadQuery: a parameter is missing or too long.
    """
    found = []
    for key in ("dag_id", "run_id"):
        value = str(params.get(key) or "")
        if not value:
            raise _BadQuery(f"{key} is required")
        if len(value) > _MAX_ID:
            raise _BadQuery(f"{key} is longer than {_MAX_ID} characters")
        found.append(value)
    return found[0], found[1]


@dataclass(frozen=True)
class Recorded:
    """What the task try recorded (its XComs) about its run and its connection."""

    namespace: str | None
    uid: str | None
    backend: str | None
    connection: Mapping[str, Any] | None


def connection_of(recorded: Mapping[str, Any] | None) -> tuple[str | None, str | None, bool | None]:
    """``(kubernetes_conn_id, cluster_context, in_cluster)`` of the task's connection.

    Raises:
        _BadQuery: the task reached its cluster through a kubeconfig file of its own (the API
            server does not read files a task names).
    """
    if recorded is None:  # a try of an older provider: the operator's default
        return "kubernetes_default", None, None
    if recorded.get("config_file"):
        raise _BadQuery(
            "the task reaches its cluster through a kubeconfig file (config_file): the view "
            "reads only through Airflow connections"
        )
    conn = recorded.get("kubernetes_conn_id")
    context = recorded.get("cluster_context")
    in_cluster = recorded.get("in_cluster")
    return (
        str(conn) if conn else None,
        str(context) if context else None,
        bool(in_cluster) if in_cluster is not None else None,
    )


def settings_of(recorded: Mapping[str, Any] | None) -> ClientSettings:
    """The cluster settings of the task's connection (reads the connection: blocking)."""
    from airflow_provider_jobset.hooks import JobSetHook

    conn, context, in_cluster = connection_of(recorded)
    hook = JobSetHook(conn, cluster_context=context, in_cluster=in_cluster)
    return hook.get_config().client_settings()


def summarize(picture: Mapping[str, Any]) -> dict[str, Any]:
    """What a DAG run's summary shows of one task's picture: the JobSet line, its pods of the
    newest attempt by phase, and the last thing its timeline says."""
    pods = [
        pod
        for rj in picture.get("grid") or []
        for job in rj.get("jobs") or []
        for pod in job.get("pods") or []
    ]
    newest = max((p.get("attempt") or 0 for p in pods), default=0)
    phases: dict[str, int] = {}
    for pod in pods:
        if (pod.get("attempt") or 0) == newest:
            phases[str(pod.get("phase"))] = phases.get(str(pod.get("phase")), 0) + 1
    timeline = picture.get("timeline") or []
    return {
        "jobset": picture.get("jobset") or {},
        "phases": dict(sorted(phases.items())),
        "last": timeline[-1] if timeline else None,
    }


async def read_picture(
    settings: ClientSettings, identity: TaskIdentity, recorded: Recorded, *, summary: bool = False
) -> dict[str, Any]:
    """The picture of the task try's run: found in the recorded namespace by its identity
    labels (either backend; the recorded UID first when several match). ``summary``: read
    no log and no node, answer :func:`summarize`'s ``summary`` instead of the picture."""
    from jobset_core import lifecycle as core

    namespace = recorded.namespace
    if not namespace:
        return {"found": False, "message": _NOT_CREATED}
    async with core.session(settings, validate=False, server_checks=False) as lifecycle:
        found = await _run_of(lifecycle, identity, recorded)
        if isinstance(found, dict):
            return found
        limits: dict[str, Any] = {"max_logs": 0, "max_nodes": 0, "objects": False}
        limits = limits if summary else {}
        try:
            picture = await lifecycle.runs.picture(found, **limits)
        except JobSetGone:
            return {"found": False, "message": "the JobSet was deleted meanwhile"}
    if summary:
        return {"found": True, "message": "", "summary": summarize(picture)}
    return {"found": True, "message": "", "picture": picture}


async def _run_of(
    lifecycle: Lifecycle, identity: TaskIdentity, recorded: Recorded
) -> Handle | dict[str, Any]:
    """The task try's run, found in the recorded namespace by its identity labels (either
    backend; the recorded UID first when several match), or the answer saying it is not."""
    namespace = str(recorded.namespace)
    selector = identity_labels(identity.identity())
    found = await lifecycle.runs.find(namespace=namespace, label_selector=selector)
    if not found:
        return {
            "found": False,
            "message": f"no JobSet of this task instance in namespace {namespace!r} "
            "(deleted after the run, or not created yet)",
        }
    ours = [s for s in found if recorded.uid and s.handle.uid == recorded.uid]
    return (ours or found)[-1].handle


#: Seconds a run nobody looks at keeps its watch.
IDLE = 60.0
#: Seconds a new watch may take to list the run before a picture is read without it.
SYNC_WITHIN = 10.0


@dataclass
class _Watch:
    stack: contextlib.AsyncExitStack
    lifecycle: Lifecycle
    handle: Handle
    tracked: Tracked
    loop: asyncio.AbstractEventLoop
    used: float


class Watches:
    """One watch per run being looked at, per API-server process: a refresh reads what it
    keeps (the run's JobSet or anchor, Jobs, pods, Events, Workload: no list), never the
    cluster per viewer. A run nobody looked at for :data:`IDLE` seconds is let go (its watch,
    client and connections closed); one the identity may not watch is read with one look per
    refresh, as before.

    The watch is the lifecycle's own (``Observer.track`` on a session of its own, watching
    only that run's objects), so what the page shows is what a waiting task sees."""

    def __init__(self, idle: float = IDLE, clock: Callable[[], float] = time.monotonic):
        self._idle = idle
        self._clock = clock
        self._watches: dict[Any, _Watch] = {}
        self._opening: dict[Any, asyncio.Lock] = {}
        self._sweeper: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self._watches)

    async def read(
        self, settings: ClientSettings, identity: TaskIdentity, recorded: Recorded
    ) -> dict[str, Any]:
        """The picture of the task try's run (as :func:`read_picture` answers), from its
        watch (opened on first sight)."""
        namespace = recorded.namespace
        if not namespace:
            return {"found": False, "message": _NOT_CREATED}
        await self._sweep()
        key = (repr(settings), namespace, identity, recorded.uid)  # in memory only
        async with self._opening.setdefault(key, asyncio.Lock()):
            watch = self._watches.get(key)
            if watch is None:
                opened = await self._open(settings, identity, recorded)
                if isinstance(opened, dict):
                    return opened
                watch = self._watches[key] = opened
                self._start_sweeper()
        watch.used = self._clock()
        tracked = watch.tracked
        kept = tracked.observation()
        watched = tracked.problem() is None and kept.synced
        observation = kept if watched else None  # not watched (yet): one look now
        try:
            picture = await watch.lifecycle.runs.picture(watch.handle, observation=observation)
        except JobSetGone:
            await self._close(key)
            return {"found": False, "message": "the JobSet was deleted meanwhile"}
        return {"found": True, "message": "", "picture": picture}

    async def _open(
        self, settings: ClientSettings, identity: TaskIdentity, recorded: Recorded
    ) -> _Watch | dict[str, Any]:
        from jobset_core import lifecycle as core

        stack = contextlib.AsyncExitStack()
        try:
            lifecycle = await stack.enter_async_context(
                core.session(settings, validate=False, server_checks=False)
            )
            handle = await _run_of(lifecycle, identity, recorded)
            if isinstance(handle, dict):
                await stack.aclose()
                return handle
            target = lifecycle.runs.backend(handle.backend).target(handle)
            tracked = await stack.enter_async_context(lifecycle.observer.track(target))
            await tracked.until(
                lambda seen: True if seen.synced or tracked.problem() else None, SYNC_WITHIN
            )
        except BaseException:
            await stack.aclose()
            raise
        loop = asyncio.get_running_loop()
        return _Watch(stack, lifecycle, handle, tracked, loop, self._clock())

    async def _close(self, key: Any) -> None:
        watch = self._watches.pop(key, None)
        self._opening.pop(key, None)
        if watch is None:
            return
        if watch.loop is asyncio.get_running_loop():
            with contextlib.suppress(Exception):
                await watch.stack.aclose()
        # else: its loop is gone (a test client's); nothing of it can run any more

    async def _sweep(self) -> None:
        now = self._clock()
        loop = asyncio.get_running_loop()
        for key, watch in list(self._watches.items()):
            if now - watch.used >= self._idle or watch.loop is not loop:
                await self._close(key)

    def _start_sweeper(self) -> None:
        if self._sweeper is not None and not self._sweeper.done():
            return

        async def sweep() -> None:
            while self._watches:
                await asyncio.sleep(self._idle / 2)
                await self._sweep()

        self._sweeper = asyncio.get_running_loop().create_task(sweep())

    async def aclose(self) -> None:
        """Let every watch go."""
        for key in list(self._watches):
            await self._close(key)


class Pictures:
    """One read per run every :data:`FRESH_FOR` seconds, shared by every viewer of the
    process (concurrent viewers wait for the one read in flight)."""

    def __init__(self, fresh_for: float = FRESH_FOR, clock: Callable[[], float] = time.monotonic):
        self._fresh_for = fresh_for
        self._clock = clock
        self._kept: dict[Any, tuple[float, dict[str, Any]]] = {}
        self._locks: dict[Any, asyncio.Lock] = {}

    async def get(self, key: Any, read: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """The picture kept for ``key`` while fresh, else what ``read`` returns (kept)."""
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            kept = self._kept.get(key)
            now = self._clock()
            if kept is not None and now - kept[0] < self._fresh_for:
                return kept[1]
            for old in [k for k, (t, _) in self._kept.items() if now - t >= self._fresh_for]:
                self._kept.pop(old, None)
                held = self._locks.get(old)
                if old != key and held is not None and not held.locked():
                    del self._locks[old]  # the memory of past keys stays bounded
            answer = await read()
            self._kept[key] = (self._clock(), answer)
            return answer
