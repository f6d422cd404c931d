"""Pod logs of a run: following one pod while the run is waited for, and the tails of failed
pods when it ends. One implementation for every way in.

The follower finds its pod in the observer (no polling): it waits until the chosen pod of the
latest attempt has a started container, streams its log, and when that pod is replaced (a
retried pod, a restarted JobSet) moves on to the new one. Each line goes to a sink as a
:class:`LogLine`; the caller formats it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobset_core.backends import _common as common
from jobset_core.backends._base import Handle
from jobset_core.errors import ApiError, JobSetError, NotFound
from jobset_core.lifecycle._judge import head_jobset
from jobset_core.observe import Tracked
from jobset_core.resources import POD

if TYPE_CHECKING:
    from jobset_core.client import Client

__all__ = [
    "FollowState",
    "LogLine",
    "LogSink",
    "LogTarget",
    "failed_pod_logs",
    "follow_logs",
    "read_log",
    "run_follower",
    "stop_follower",
]


@dataclass(frozen=True)
class LogTarget:
    """Whose log to follow: ``replicated_job`` (default: the coordinator, else the first
    replicated job), its Job index and pod (completion) index."""

    replicated_job: str | None = None
    job_index: int = 0
    pod_index: int = 0


@dataclass(frozen=True)
class LogLine:
    """One line of a pod's log."""

    pod: str
    container: str | None
    text: str


LogSink = Callable[[LogLine], None]


def _started(pod: Mapping[str, Any]) -> bool:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    states = [s.get("state") or {} for s in statuses if isinstance(s, Mapping)]
    return any("running" in state or "terminated" in state for state in states)


@dataclass
class FollowState:
    """Whether a follower is reading a stream right now (an idle one is stopped at once)."""

    streaming: bool = False


async def follow_logs(
    client: Client,
    tracked: Tracked,
    handle: Handle,
    target: LogTarget,
    sink: LogSink,
    *,
    once: bool = False,
    state: FollowState | None = None,
) -> None:
    """Follow the target pod's log into ``sink`` until cancelled; a replaced pod is followed
    in turn (each pod once). With ``once``, return when the first pod's log ends."""
    followed: set[str] = set()
    state = state or FollowState()
    while True:
        observation = tracked.observation()
        pod = None
        try:
            jobset = None if target.replicated_job else head_jobset(handle, observation)
        except JobSetError:
            jobset = None
        ref = common.log_pod_target(
            jobset,
            replicated_job=target.replicated_job,
            job_index=target.job_index,
            pod_index=target.pod_index,
        )
        if ref is not None:
            pod = common.choose_log_pod(observation.pods, ref)
        meta = (pod or {}).get("metadata") or {}
        uid = str(meta.get("uid") or meta.get("name") or "")
        if pod is not None and uid not in followed and _started(pod):
            followed.add(uid)
            name, container = str(meta["name"]), common.pod_container(pod)
            state.streaming = True
            try:
                async for line in client.stream_pod_log(
                    name, namespace=handle.namespace, container=container, follow=True
                ):
                    sink(LogLine(name, container, line))
            except ApiError as error:
                if error.status == 400:  # the container is not running yet: look again
                    followed.discard(uid)
                    await tracked.changed(1.0)
                    continue
                if not isinstance(error, NotFound):
                    raise
            finally:
                state.streaming = False
            if once:
                return
            continue
        await tracked.changed(None)


async def run_follower(
    client: Client,
    tracked: Tracked,
    handle: Handle,
    target: LogTarget,
    *,
    sink: LogSink,
    state: FollowState,
) -> None:
    """:func:`follow_logs` that never fails the run: a log is a courtesy."""
    try:
        await follow_logs(client, tracked, handle, target, sink, state=state)
    except asyncio.CancelledError:
        raise
    except Exception as error:
        sink(LogLine("", None, f"<log stream ended: {error}>"))


async def stop_follower(task: asyncio.Task[None], state: FollowState, drain: float) -> None:
    """Stop a follower: one reading a stream gets up to ``drain`` seconds to reach its end
    (the container has stopped, so it ends by itself); an idle one stops at once."""
    if state.streaming:
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(task), drain)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def failed_containers(pod: Mapping[str, Any]) -> list[tuple[str, bool]]:
    """The containers of a pod whose log tells why it failed, as ``(container, previous)``:
    one that exited non-zero (its log), one crash-looping (its previous run's log); for a
    failed pod without such a container, its first container."""
    status = pod.get("status") or {}
    found: list[tuple[str, bool]] = []
    for item in status.get("containerStatuses") or []:
        state, last = item.get("state") or {}, item.get("lastState") or {}
        terminated = state.get("terminated") or {}
        if terminated and terminated.get("exitCode", 0) != 0:
            found.append((str(item.get("name")), False))
        elif (state.get("waiting") or {}).get("reason") == "CrashLoopBackOff" and (
            (last.get("terminated") or {}).get("exitCode", 0) != 0
        ):
            found.append((str(item.get("name")), True))
    if not found and status.get("phase") == "Failed":
        first = common.pod_container(pod)
        found = [(first, False)] if first else []
    return found


async def failed_pod_logs(client: Client, handle: Handle, *, tail_lines: int) -> dict[str, str]:
    """The last ``tail_lines`` lines of every failed or crash-looping container of the run,
    by pod name (``pod/container`` when several of a pod failed); a log that cannot be read any
    more says so in words."""
    selector = common.jobset_selector(handle.name, handle.uid or None)
    pods = await client.list(POD, namespace=handle.namespace, label_selector=selector)
    out: dict[str, str] = {}
    for pod in sorted(pods.items, key=lambda p: str(p["metadata"].get("name"))):
        name = str(pod["metadata"]["name"])
        containers = failed_containers(pod)
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
    ref = common.log_pod_target(
        jobset,
        replicated_job=target.replicated_job,
        job_index=target.job_index,
        pod_index=target.pod_index,
    )
    pod = common.choose_log_pod(pods, ref) if ref is not None else None
    if pod is None:
        raise NotFound(404, "NotFound", f"no pod {ref or target} of JobSet {handle.name}")
    name, container = str(pod["metadata"]["name"]), common.pod_container(pod)
    text = await client.read_pod_log(name, namespace=handle.namespace, container=container)
    for line in text.splitlines():
        sink(LogLine(name, container, line))
