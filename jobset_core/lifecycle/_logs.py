"""Pod logs of a run: following them while the run is waited for, and the tails of failed
pods when it ends. One implementation for every way in (the worker, the deferrable trigger,
the KFP step, ``jobsetctl``).

A :class:`Follower` finds its pods in the observer (no polling): on every change of the run it
selects the container logs to follow (:func:`~jobset_core.lifecycle._log_plan.select_streams`:
the coordinator, the leaders, all pods or a label selector, of the latest restart attempt) and
streams each from the moment its container has started; the pods of a restarted attempt are
picked up as they come. Each line goes to a sink as a
:class:`~jobset_core.lifecycle._log_plan.LogLine`, within the bounds of a
:class:`~jobset_core.lifecycle._log_plan.LogBudget`.

Every log's position is kept in a :class:`~jobset_core.lifecycle._log_plan.LogCursor`: a stream
that broke is read again from where it stopped, and with ``resume`` the cursor is kept on the
run itself (an annotation of the JobSet, or of the native anchor), so that a follower that
starts again in another process (a restarted triggerer) continues without repeating a line.

When the wait ends, the follower is closed: it reads every selected log as it is then, to its
end and without following, from where its cursor stands (a pod that ran and finished between
two looks still shows its log; a container that still runs shows what it wrote so far), from
the API server's list of the run's pods when the observer's view may trail the run's end, and
gets a bounded time for that.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from jobset_core import identity as ident
from jobset_core import labels as L
from jobset_core import pods as podread
from jobset_core.backends import Handle
from jobset_core.errors import ApiError, JobSetError, NotFound, Unreachable
from jobset_core.lifecycle._judge import head_jobset
from jobset_core.lifecycle._log_plan import (
    MAX_LINE_BYTES,
    LogBudget,
    LogCursor,
    LogLine,
    LogOptions,
    LogTarget,
    Selection,
    StreamRef,
    fingerprint,
    select_streams,
)
from jobset_core.observe import Tracked, backoff
from jobset_core.pods import failed_containers
from jobset_core.resources import CONFIG_MAP, JOBSET, POD

if TYPE_CHECKING:
    from jobset_core.client import Client

__all__ = [
    "CURSOR_ANNOTATION",
    "CursorStore",
    "FollowControl",
    "Follower",
    "LogLine",
    "LogOptions",
    "LogSink",
    "LogTarget",
    "RunCursorStore",
    "failed_containers",
    "failed_pod_logs",
    "read_log",
    "run_follower",
    "run_pods",
    "stop_follower",
    "unreadable",
]

log = logging.getLogger(__name__)

LogSink = Callable[[LogLine], None]

#: The annotation of the run's JobSet (or native anchor) that keeps a resumable follower's
#: cursor.
CURSOR_ANNOTATION = "jobset-core/log-cursor"
#: How often a resumable follower saves its cursor while lines flow (seconds): what a
#: follower killed without warning (SIGKILL) may repeat once.
CURSOR_SAVE_EVERY = 10.0
#: How long saving the cursor may take when the follower stops (seconds).
CURSOR_SAVE_TIMEOUT = 5.0
#: The longest wait between two attempts to read a log that cannot be read yet (seconds).
RETRY_MAX = 30.0
#: How long a closing follower waits for the observer to have listed the run's pods (a wait
#: that ended as soon as it began: an adopted run that had finished already).
SYNC_WAIT = 3.0


class CursorStore(Protocol):
    """Where a resumable follower keeps its cursor."""

    async def load(self) -> LogCursor:
        """The cursor saved last (an empty one when there is none)."""
        ...

    async def save(self, cursor: LogCursor) -> None:
        """Keep the cursor."""
        ...


class RunCursorStore:
    """The cursor as an annotation of the run's JobSet (or native anchor):
    :data:`CURSOR_ANNOTATION` (a merge patch of the metadata; no resourceVersion condition, so
    it never races the controller's or a native waiter's status writes)."""

    def __init__(self, client: Client, handle: Handle) -> None:
        self._client, self._handle = client, handle
        self._resource = CONFIG_MAP if handle.backend == "native" else JOBSET

    async def load(self) -> LogCursor:
        handle = self._handle
        obj = await self._client.get(self._resource, handle.name, namespace=handle.namespace)
        meta = obj.get("metadata") or {}
        if handle.uid and meta.get("uid") not in (None, "", handle.uid):
            return LogCursor()  # a namesake: not this run's cursor
        return LogCursor.from_text((meta.get("annotations") or {}).get(CURSOR_ANNOTATION))

    async def save(self, cursor: LogCursor) -> None:
        handle = self._handle
        meta: dict[str, Any] = {"annotations": {CURSOR_ANNOTATION: cursor.to_text()}}
        if handle.uid:
            meta["uid"] = handle.uid  # never a namesake's: the server refuses a uid change
        body = {"metadata": meta}
        await self._client.patch(self._resource, handle.name, body, namespace=handle.namespace)


@dataclass
class FollowControl:
    """How the waiter ends a follower: :meth:`close` (it drains, then returns)."""

    closing: asyncio.Event = field(default_factory=asyncio.Event)
    wake: Callable[[], None] | None = None

    def close(self) -> None:
        """The wait is over: read what is left of ended containers' logs, then stop."""
        self.closing.set()
        if self.wake is not None:
            self.wake()


def _notice(text: str) -> LogLine:
    return LogLine("", None, text, notice=True)


class Follower:
    """Follows the logs of one run (see the module docs).

    Args:
        client: The API client.
        tracked: The run, as the observer tracks it.
        handle: The run.
        options: What to follow, and the bounds.
        sink: Where lines go.
        control: How the waiter ends it.
        store: Where the cursor is kept (``resume``); ``None``: in memory only.
        once: Return once the first log followed has ended (``jobsetctl logs -f``).
    """

    def __init__(
        self,
        client: Client,
        tracked: Tracked,
        handle: Handle,
        options: LogOptions,
        sink: LogSink,
        *,
        control: FollowControl | None = None,
        store: CursorStore | None = None,
        once: bool = False,
    ) -> None:
        self.client, self.tracked, self.handle = client, tracked, handle
        self.options, self.sink, self.store, self.once = options, sink, store, once
        self.control = control or FollowControl()
        self.control.wake = tracked.wake
        self.cursor = LogCursor()
        self.budget = LogBudget(options.max_bytes_per_second, options.max_bytes)
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.following: set[str] = set()  # the keys of the tasks that follow their log
        self.done: set[str] = set()
        self.retry_at: dict[str, tuple[float, int]] = {}
        self.running: dict[str, bool] = {}
        self._told: set[str] = set()
        self._listed: tuple[frozenset[str], frozenset[str]] | None = None
        self._saved_at = 0.0
        self._dirty = False
        self._over = False
        self._first_ended = False

    # ------------------------------------------------------------------ the loop

    async def run(self) -> None:
        """Follow until closed (or the size limit is reached), then drain."""
        if self.store is not None:
            try:
                self.cursor = await self.store.load()
            except JobSetError as error:
                log.info("no log cursor of %s: %s", self.handle.name, error)
            self.budget.spent = self.cursor.spent
        try:
            while not self.control.closing.is_set() and not self._stopped():
                await self._follow()
                await self._maybe_save()
                await self.tracked.changed(self._next_wake())
            if not self._stopped():
                await self._synced(SYNC_WAIT)  # a wait that ended early: its pods may trail
                await self._finish()
            await self._drain()
        finally:
            for task in self.tasks.values():
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*self.tasks.values(), return_exceptions=True)
            note = self.budget.drop_note(time.time(), force=True)
            if note:
                self.sink(_notice(note))
            if self._unsaved():  # a shielded save is a task: two turns of a busy loop
                await asyncio.shield(self._save(final=True))

    async def _synced(self, wait: float) -> None:
        """Give the observer up to ``wait`` seconds to have listed the run's pods."""
        await self.tracked.until(lambda seen: seen.synced or None, wait)

    def _stopped(self) -> bool:
        return self._over or (self.once and self._first_ended)

    def _next_wake(self) -> float | None:
        waits = [at - time.time() for at, _ in self.retry_at.values()]
        if self.store is not None and self._dirty:
            waits.append(CURSOR_SAVE_EVERY)
        return max(0.05, min(waits)) if waits else None

    async def _follow(self) -> None:
        """Start a stream for every selected log not followed yet."""
        observation = self.tracked.observation()
        selection = await self._select(observation.pods, observation)
        self.running = {ref.key: ref.running for ref in selection.streams}
        now = time.time()
        for ref in selection.streams:
            if ref.key in self.done or ref.key in self.tasks:
                continue
            retry = self.retry_at.get(ref.key)
            if retry is not None and retry[0] > now:
                continue
            self.tasks[ref.key] = asyncio.create_task(self._stream(ref, follow=True))
            self.following.add(ref.key)

    async def _finish(self) -> None:
        """The last pass, once the wait is over: every selected log not read to its end is
        read as it is now (no follow: the read ends at once, whether its container still
        runs or not), from where its cursor stands.

        The observer's view may trail the run's end: a container it still shows running or
        not started, a pod it has not seen, a stream still being opened. The run has ended,
        so the cluster's own list of its pods is read then (one request); a view that shows
        every selected log ended costs nothing."""
        observation = self.tracked.observation()
        selection = await self._select(observation.pods, observation)
        trailing = (
            self.tasks
            or not selection.pods
            or selection.unstarted
            or any(ref.running and ref.key not in self.done for ref in selection.streams)
        )
        if trailing:
            pods = await self._list_pods()
            if pods is not None:
                selection = await self._select(pods, observation)
        for task in self.tasks.values():
            task.cancel()  # a follow in flight: read again below, from its cursor
        if self.tasks:
            await asyncio.gather(*self.tasks.values(), return_exceptions=True)
        for ref in selection.streams:
            if ref.key not in self.done:
                self.tasks[ref.key] = asyncio.create_task(self._stream(ref, follow=False))

    async def _select(self, pods: Any, observation: Any) -> Selection:
        """The logs to read among ``pods`` (telling once when the pod bound leaves some out)."""
        try:
            jobset = head_jobset(self.handle, observation)
        except JobSetError:
            jobset = None
        matching = await self._matching(pods) if self.options.selector else None
        selection = select_streams(pods, jobset, self.options, matching)
        if selection.left_out:
            total = selection.pods + selection.left_out
            self._tell(
                "left-out",
                f"<logs: following {selection.pods} of {total} pods (the log pod limit)>",
            )
        return selection

    async def _list_pods(self) -> list[Any] | None:
        """The run's pods as the API server lists them now (``None``: it could not say)."""
        try:
            return await run_pods(self.client, self.handle)
        except JobSetError as error:
            log.info("could not list the pods of %s for its last logs: %s", self.handle.name, error)
            return None

    async def _drain(self) -> None:
        """Stop what still follows; let the last reads end (the caller bounds how long)."""
        for key in self.following:
            self.tasks[key].cancel()
        if self.tasks:
            await asyncio.gather(*self.tasks.values(), return_exceptions=True)

    def _tell(self, key: str, text: str) -> None:
        if key not in self._told:
            self._told.add(key)
            self.sink(_notice(text))

    async def _matching(self, pods: Any) -> frozenset[str]:
        """The run's pods that match the label selector (one list per new set of pods)."""
        names = frozenset(podread.PodView.of(p).name for p in pods)
        if self._listed is not None and self._listed[0] == names:
            return self._listed[1]
        selector = f"{L.JOBSET_NAME}={self.handle.name},{self.options.selector}"
        try:
            found = await self.client.list(
                POD, namespace=self.handle.namespace, label_selector=selector
            )
        except ApiError as error:
            self._tell(
                "selector", f"<logs: cannot select pods by {selector!r}: {unreadable(error)}>"
            )
            matched: frozenset[str] = frozenset()
        except JobSetError:
            return self._listed[1] if self._listed is not None else frozenset()
        else:
            matched = frozenset(podread.PodView.of(p).name for p in found.items)
        self._listed = (names, matched)
        return matched

    # ------------------------------------------------------------------ one log

    async def _stream(self, ref: StreamRef, *, follow: bool) -> None:
        read, last = self.cursor.read(ref.key)
        count = 0
        ended = False
        try:
            async for line in self.client.stream_pod_log(
                ref.pod,
                namespace=self.handle.namespace,
                container=ref.container,
                follow=follow,
                max_line_bytes=MAX_LINE_BYTES,
            ):
                count += 1
                if count < read:
                    continue
                if count == read:
                    if last and fingerprint(line) != last:
                        self._tell(
                            f"rotated:{ref.key}",
                            f"<logs of {ref.pod}/{ref.container}: the log is not the one read "
                            "before (the kubelet rotated it?): some lines may be missing>",
                        )
                    continue
                self.cursor.advance(ref.key, count, line)
                self._dirty = True
                self._show(ref, line)
                if self._over:
                    return
            ended = True
        except NotFound:
            ended = True  # the pod (or its node) is gone: nothing more to read
        except ApiError as error:
            if error.status != 400:  # 400: the container is not running (yet)
                self._tell(f"error:{ref.key}", f"<logs of {ref.pod}: {unreadable(error)}>")
            self._later(ref.key)
        except Unreachable:
            self._later(ref.key)  # the stream broke: read again from the cursor
        finally:
            self.tasks.pop(ref.key, None)
            self.following.discard(ref.key)
        if ended:
            if follow and self.running.get(ref.key, False) and not self.control.closing.is_set():
                self._later(ref.key)  # the server ended the stream, the container runs on
            else:
                self.done.add(ref.key)
                self.retry_at.pop(ref.key, None)
                self._first_ended = True
        self.tracked.wake()

    def _later(self, key: str) -> None:
        _, failures = self.retry_at.get(key, (0.0, 0))
        delay = min(RETRY_MAX, backoff(failures + 1, random.random()))
        self.retry_at[key] = (time.time() + delay, failures + 1)

    def _show(self, ref: StreamRef, line: str) -> None:
        now = time.time()
        decision = self.budget.take(len(line.encode("utf-8", "replace")) + 1, now)
        if decision == "show":
            self.sink(LogLine(ref.pod, ref.container, line, several=ref.several))
        elif decision == "over":
            self._over = True
            self.sink(_notice(self.budget.over_note()))
            self.tracked.wake()
        note = self.budget.drop_note(now)
        if note:
            self.sink(_notice(note))

    # ------------------------------------------------------------------ the cursor

    async def _maybe_save(self) -> None:
        if (
            self.store is not None
            and self._dirty
            and time.time() - self._saved_at >= CURSOR_SAVE_EVERY
        ):
            await self._save(final=False)

    def _unsaved(self) -> bool:
        """Whether the cursor has moved since it was last kept (and is kept at all)."""
        return self.store is not None and self._dirty

    async def _save(self, *, final: bool) -> None:
        store = self.store if self._unsaved() else None
        if store is None:
            return
        self.cursor.spent = self.budget.spent
        self._dirty = False
        self._saved_at = time.time()
        try:
            if final:
                async with asyncio.timeout(CURSOR_SAVE_TIMEOUT):
                    await store.save(self.cursor)
            else:
                await store.save(self.cursor)
        except (TimeoutError, JobSetError) as error:
            self._dirty = True
            log.info("could not keep the log cursor of %s: %s", self.handle.name, error)


async def run_follower(follower: Follower) -> None:
    """:meth:`Follower.run` that never fails the run: a log is a courtesy."""
    try:
        await follower.run()
    except asyncio.CancelledError:
        raise
    except Exception as error:
        follower.sink(_notice(f"<logs stopped: {error}>"))


async def stop_follower(task: asyncio.Task[None], control: FollowControl, drain: float) -> None:
    """End a follower: it reads what is left of ended containers' logs for up to ``drain``
    seconds, then is cancelled (it never keeps the caller waiting longer). A cancellation of
    the caller goes on (the follower is cancelled on the way); the follower's own end, however
    it ends, is not the caller's error."""
    control.close()
    try:
        if not task.done():
            await asyncio.wait({task}, timeout=drain)
    finally:
        if not task.done():
            task.cancel()
    if not task.done():
        await asyncio.wait({task})


async def run_pods(client: Client, handle: Handle) -> list[Any]:
    """The run's pods as the API server lists them now (not a namesake's)."""
    selector = ident.jobset_selector(handle.name, handle.uid or None)
    found = await client.list(POD, namespace=handle.namespace, label_selector=selector)
    return list(found.items)


async def failed_pod_logs(client: Client, handle: Handle, *, tail_lines: int) -> dict[str, str]:
    """The last ``tail_lines`` lines of every failed or crash-looping container of the run,
    by pod name (``pod/container`` when several of a pod failed); a log that cannot be read any
    more says so in words."""
    out: dict[str, str] = {}
    for view in sorted(
        map(podread.PodView.of, await run_pods(client, handle)), key=lambda v: v.name
    ):
        name = view.name
        containers = failed_containers(view.raw)
        for container, previous in containers:
            key = name if len(containers) == 1 else f"{name}/{container}"
            try:
                out[key] = await client.read_pod_log(
                    name,
                    namespace=handle.namespace,
                    container=container,
                    tail_lines=tail_lines,
                    previous=previous,
                )
            except NotFound:
                out[key] = (
                    "<the log can no longer be read: the pod, its container or its node is gone>"
                )
            except ApiError as error:
                out[key] = f"<the log cannot be read: {unreadable(error)}>"
    return out


def unreadable(error: ApiError) -> str:
    """Why a log cannot be read, in the server's words when it gave some."""
    said = " ".join((error.message or "").split())[:300]
    return said or str(error.reason or error.status)


async def read_log(
    client: Client,
    handle: Handle,
    *,
    pods: Any,
    jobset: Any,
    target: LogTarget,
    sink: LogSink,
) -> None:
    """The whole log of the target pod as it is now, into ``sink``.

    Raises:
        NotFound: the run has no such pod.
    """
    ref = podread.log_pod_target(
        jobset,
        replicated_job=target.replicated_job,
        job_index=target.job_index,
        pod_index=target.pod_index,
    )
    pod = podread.choose_log_pod(pods, ref) if ref is not None else None
    if pod is None:
        raise NotFound(404, "NotFound", f"no pod {ref or target} of JobSet {handle.name}")
    name, container = podread.PodView.of(pod).name, podread.pod_container(pod)
    text = await client.read_pod_log(name, namespace=handle.namespace, container=container)
    for line in text.splitlines():
        sink(LogLine(name, container, line))
