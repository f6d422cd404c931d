"""``JobSetTrigger``: wait for a JobSet asynchronously in the triggerer.

The trigger runs the core's one wait (:meth:`jobset_core.lifecycle.Lifecycle.wait`, the same
the worker runs) on the task's one :class:`~jobset_core.lifecycle.RunRequest`, through a shared
session (:func:`jobset_core.lifecycle.session` with ``shared=True``): every trigger of the
process shares one client and one informer per kind (cluster-wide when the identity may watch
every namespace, else one per namespace), for both backends. A native run is driven
(reconciled) by the trigger that waits for it. An error mid-wait applies the request's delete
policy as the worker would (``always`` deletes the run), then fails the task.

The trigger fires one event: the wait's :class:`~jobset_core.lifecycle.Verdict`, held back
while Airflow's worker may not yet have seen the deferring process exit (a
:class:`~airflow_provider_jobset._decisions.ResumeGuard`: a run that ends within seconds of
the deferral would otherwise have its resumed try failed by the scheduler). ``cleanup()``
never deletes anything (it runs on every triggerer restart); ``on_kill()`` (Airflow 3.3+,
called only when a user marks or clears the deferred task) deletes the JobSet with one request.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import socket
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from airflow_provider_jobset._compat import BaseTrigger, TriggerEvent, conf
from airflow_provider_jobset._decisions import LOOK_AGAIN, RESUME_MARGIN, ResumeGuard
from airflow_provider_jobset.hooks import JobSetHook
from jobset_core.lifecycle import Handle, LogLine, Reporter, RunRequest, session
from jobset_core.outcome import Progress

__all__ = ["JobSetTrigger", "LookAgainTrigger", "resume_guard"]

_KILL_TIMEOUT = 20.0

#: Deletions of killed tasks still under way (a task the loop holds only weakly otherwise).
_DELETIONS: set[asyncio.Future[None]] = set()


def _this_process() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def resume_guard() -> ResumeGuard:
    """The guard of a task deferring now, in this process (read where the task runs: the
    worker's ``[workers] min_heartbeat_interval`` is the one that counts)."""
    interval = conf.getfloat("workers", "min_heartbeat_interval", fallback=5.0)
    return ResumeGuard(time.time(), interval + RESUME_MARGIN, _this_process())


async def _held(guard: ResumeGuard | None, log: Any) -> None:
    """Wait out what ``guard`` holds of an event fired now (said in the trigger's log)."""
    if guard is None:
        return
    wait = guard.hold(time.time(), _this_process())
    if wait > 0:
        log.info(
            "the task resumes in %.1fs: Airflow's worker may not have seen the task's "
            "deferring process exit yet (it looks every [workers] min_heartbeat_interval)",
            wait,
        )
        await asyncio.sleep(wait)


def _guard(given: ResumeGuard | Mapping[str, Any] | None) -> ResumeGuard | None:
    """A guard from a trigger's arguments (itself, or its :func:`_guard_kwargs`)."""
    return given if given is None or isinstance(given, ResumeGuard) else ResumeGuard(**given)


def _guard_kwargs(guard: ResumeGuard | None) -> dict[str, Any] | None:
    """A guard as a trigger's serialized argument."""
    return None if guard is None else dataclasses.asdict(guard)


def _deleted(deletion: asyncio.Future[None]) -> None:
    _DELETIONS.discard(deletion)
    if not deletion.cancelled():
        deletion.exception()  # said by the deletion itself, also when no one awaits it


class JobSetTrigger(BaseTrigger):
    """Fires when a JobSet ends, restarts (``on_restart="return"``), reaches one of the
    request's ``until`` phases, disappears, or the deadline passes.

    Args:
        handle: The run (a :class:`~jobset_core.lifecycle.Handle` or its fields): a
            namesake with another UID counts as gone.
        request: What the task asked of the core (a
            :class:`~jobset_core.lifecycle.RunRequest` or :meth:`~RunRequest.to_dict`): the
            deadline, the wait rules, the logs to follow, ``cancel_on_kill`` (deleting the
            JobSet when a user kills the deferred task).
        restarts: The restarts the task already saw (the baseline for ``on_restart``).
        kubernetes_conn_id: The Airflow connection (read in the triggerer, asynchronously).
        config_file: A kubeconfig file overriding the connection.
        cluster_context: A kubeconfig context overriding the connection.
        in_cluster: Use the service account, overriding the connection.
        resume_guard: When the event may resume the task (:func:`resume_guard`, as the
            operator and the sensor defer); ``None`` fires it at once.

    Log lines go to the trigger's log, which Airflow shows in the task's log; how far each
    log was read is kept on the run, so a trigger that a restarted triggerer runs again
    continues without repeating a line.
    """

    def __init__(
        self,
        *,
        handle: Handle | Mapping[str, Any],
        request: RunRequest | Mapping[str, Any],
        restarts: int | None = None,
        kubernetes_conn_id: str | None = JobSetHook.default_conn_name,
        config_file: str | None = None,
        cluster_context: str | None = None,
        in_cluster: bool | None = None,
        resume_guard: ResumeGuard | Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.handle = handle if isinstance(handle, Handle) else Handle(**handle)
        self.request = request if isinstance(request, RunRequest) else RunRequest.from_dict(request)
        self.restarts = restarts
        self.kubernetes_conn_id = kubernetes_conn_id
        self.config_file = config_file
        self.cluster_context = cluster_context
        self.in_cluster = in_cluster
        self.resume_guard = _guard(resume_guard)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """Class path and the keyword arguments that rebuild this trigger."""
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "handle": dataclasses.asdict(self.handle),
                "request": self.request.to_dict(),
                "restarts": self.restarts,
                "kubernetes_conn_id": self.kubernetes_conn_id,
                "config_file": self.config_file,
                "cluster_context": self.cluster_context,
                "in_cluster": self.in_cluster,
                "resume_guard": _guard_kwargs(self.resume_guard),
            },
        )

    def _hook(self) -> JobSetHook:
        return JobSetHook.of(self)  # the trigger has no namespace: the connection's stands

    def _what(self) -> str:
        return f"JobSet {self.handle.namespace}/{self.handle.name}"

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Wait, then fire exactly one event: the verdict."""
        settings = (await self._hook().aget_config()).client_settings()
        report = Reporter(
            progress=self._progress,
            log=self._log_line if self.request.logs is not None else None,
        )
        async with session(settings, shared=True) as lifecycle:
            # The wait's request is the wait's alone (not held here while it waits).
            verdict = await lifecycle.wait(
                self._waited(), self.handle, report=report, restarts=self.restarts
            )
            self.log.info("%s: %s", self._what(), verdict.message)
            await _held(self.resume_guard, self.log)
        # Fired after the session: it ended at once, leaving the writes that outlive the
        # verdict (a native run's settled status) to the shared client, so nothing is held
        # here if the caller drops the trigger after its event (dag.test() does).
        yield TriggerEvent(verdict.to_payload())  # type: ignore[no-untyped-call]

    def _waited(self) -> RunRequest:
        """The request as the trigger waits on it: a triggerer restart is no kill, and a
        restarted triggerer's logs go on from where they were."""
        request = self.request.but(cancel_on_kill=False)
        if request.logs is not None:
            request = request.but(logs=dataclasses.replace(request.logs, resume=True))
        return request

    def _progress(self, progress: Progress) -> None:
        self.log.info("%s %s", self._what(), progress.line())

    def _log_line(self, line: LogLine) -> None:
        self.log.info("%s", line.shown())

    async def on_kill(self) -> None:
        """A user killed the deferred task: delete the JobSet (one request, bounded).

        The deletion is a task of its own, shielded: until the trigger has ended, the triggerer
        cancels it again at every state sync (its set of triggers to cancel is sent whole each
        time), which would cancel ``on_kill()`` mid-request on a busy triggerer, and the
        triggerer swallows that cancellation. A cancelled ``on_kill()`` returns; the deletion
        goes on to its end and says how it ended.
        """
        if not self.request.cancel_on_kill:
            return
        deletion = asyncio.ensure_future(self._delete())
        _DELETIONS.add(deletion)
        deletion.add_done_callback(_deleted)
        await asyncio.shield(deletion)

    async def _delete(self) -> None:
        try:
            config = await self._hook().aget_config()
            async with session(config.client_settings(), shared=True) as lifecycle:
                async with asyncio.timeout(_KILL_TIMEOUT):
                    await lifecycle.cancel(self.handle)
        except Exception as err:
            self.log.warning("could not delete %s (task killed by a user): %s", self._what(), err)
            raise
        self.log.info("deleted %s (task killed by a user)", self._what())

    async def cleanup(self) -> None:
        """Release local resources only: a triggerer restart must never delete the JobSet."""


class LookAgainTrigger(BaseTrigger):
    """Fires ``{"kind": "look_again"}`` at ``moment``: the deferrable sensor's next look while
    no JobSet it watches exists yet.

    Airflow's ``TimeDeltaTrigger`` would do, but for two things: its event (a datetime) is
    no verdict, and it holds nothing, so a ``poke_interval`` shorter than the task's
    :class:`~airflow_provider_jobset._decisions.ResumeGuard` window would race Airflow's
    worker as a run that ends that soon would.

    Args:
        moment: When to fire (epoch seconds).
        resume_guard: As :class:`JobSetTrigger`'s.
    """

    def __init__(
        self, *, moment: float, resume_guard: ResumeGuard | Mapping[str, Any] | None = None
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.moment = moment
        self.resume_guard = _guard(resume_guard)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """Class path and the keyword arguments that rebuild this trigger."""
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {"moment": self.moment, "resume_guard": _guard_kwargs(self.resume_guard)},
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Sleep until the moment, then fire (held by the guard)."""
        await asyncio.sleep(max(self.moment - time.time(), 0.0))
        await _held(self.resume_guard, self.log)
        yield TriggerEvent({"kind": LOOK_AGAIN})  # type: ignore[no-untyped-call]
