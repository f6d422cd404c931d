"""``JobSetTrigger``: wait for a JobSet asynchronously in the triggerer.

Controller backend: every trigger of a triggerer process shares one API client per cluster
and one JobSet watch per namespace (:mod:`airflow_provider_jobset._shared`); a trigger only
wakes up when its JobSet changes and judges each snapshot with the core's pure
``WaitTracker``. Native backend: the trigger runs the native backend's ``wait`` (which
creates the child Jobs itself) over the shared client.

The trigger fires one :class:`~airflow_provider_jobset.events.JobSetEvent`. ``cleanup()``
never deletes anything (it runs on every triggerer restart); ``on_kill()`` (Airflow 3.3+,
called only when a user marks or clears the deferred task) deletes the JobSet with one request.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal

from airflow_provider_jobset._compat import BaseTrigger, TriggerEvent
from airflow_provider_jobset.events import JobSetEvent
from airflow_provider_jobset.hooks import ConnectionConfig, JobSetHook

__all__ = ["JobSetTrigger"]

_KILL_TIMEOUT = 20.0


class JobSetTrigger(BaseTrigger):
    """Fires when a JobSet ends, restarts (``on_restart="return"``), reaches one of
    ``target_phases``, disappears, or the deadline passes.

    Args:
        name: The JobSet.
        namespace: Its namespace.
        uid: Its UID: a namesake with another UID counts as gone.
        backend: ``controller`` or ``native``.
        kubernetes_conn_id: The Airflow connection (read in the triggerer, asynchronously).
        config_file: A kubeconfig file overriding the connection.
        cluster_context: A kubeconfig context overriding the connection.
        in_cluster: Use the service account, overriding the connection.
        deadline: Epoch seconds after which the trigger fires ``timeout``.
        on_restart: ``return``: fire when ``status.restarts`` grows past ``restarts``;
            ``continue``: keep waiting through restarts.
        restarts: The restarts the caller already saw (the baseline for ``on_restart``).
        target_phases: Also fire when the JobSet's phase is one of these (sensors).
        delete_on_kill: Delete the JobSet when a user kills the deferred task.
        poll_interval: Native backend: longest quiet time between two reconcile passes.
    """

    def __init__(
        self,
        *,
        name: str,
        namespace: str,
        uid: str = "",
        backend: Literal["controller", "native"] = "controller",
        kubernetes_conn_id: str | None = JobSetHook.default_conn_name,
        config_file: str | None = None,
        cluster_context: str | None = None,
        in_cluster: bool | None = None,
        deadline: float | None = None,
        on_restart: Literal["return", "continue"] = "return",
        restarts: int | None = None,
        target_phases: Sequence[str] = (),
        delete_on_kill: bool = True,
        poll_interval: float = 5.0,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.name = name
        self.namespace = namespace
        self.uid = uid
        self.backend = backend
        self.kubernetes_conn_id = kubernetes_conn_id
        self.config_file = config_file
        self.cluster_context = cluster_context
        self.in_cluster = in_cluster
        self.deadline = deadline
        self.on_restart = on_restart
        self.restarts = restarts
        self.target_phases = list(target_phases)
        self.delete_on_kill = delete_on_kill
        self.poll_interval = poll_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """Class path and the keyword arguments that rebuild this trigger."""
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "name": self.name,
                "namespace": self.namespace,
                "uid": self.uid,
                "backend": self.backend,
                "kubernetes_conn_id": self.kubernetes_conn_id,
                "config_file": self.config_file,
                "cluster_context": self.cluster_context,
                "in_cluster": self.in_cluster,
                "deadline": self.deadline,
                "on_restart": self.on_restart,
                "restarts": self.restarts,
                "target_phases": list(self.target_phases),
                "delete_on_kill": self.delete_on_kill,
                "poll_interval": self.poll_interval,
            },
        )

    # ------------------------------------------------------------------ helpers

    def _hook(self) -> JobSetHook:
        return JobSetHook(
            self.kubernetes_conn_id,
            config_file=self.config_file,
            cluster_context=self.cluster_context,
            in_cluster=self.in_cluster,
        )

    def _remaining(self) -> float | None:
        if self.deadline is None:
            return None
        return max(self.deadline - time.time(), 0.0)

    def _event(self, kind: Literal["outcome", "timeout", "gone"], **fields: Any) -> JobSetEvent:
        return JobSetEvent(
            kind=kind, name=self.name, namespace=self.namespace, uid=self.uid, **fields
        )

    def _timeout(self) -> JobSetEvent:
        return self._event("timeout", message=f"the deadline passed before {self._what()} ended")

    def _what(self) -> str:
        return f"JobSet {self.namespace}/{self.name}"

    # ------------------------------------------------------------------ run

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Wait, then fire exactly one event."""
        config = await self._hook().aget_config()
        if self.backend == "native":
            event = await self._run_native(config)
        else:
            event = await self._run_controller(config)
        yield TriggerEvent(event.to_payload())  # type: ignore[no-untyped-call]

    async def _run_controller(self, config: ConnectionConfig) -> JobSetEvent:
        from airflow_provider_jobset._shared import lease_watch
        from jobset_core.backends import WaitTracker, restart_details
        from jobset_core.errors import NotFound

        tracker = WaitTracker("controller", return_on_restart=self.on_restart == "return")
        tracker.baseline_restarts = self.restarts
        async with lease_watch(config.key(), config.client_settings(), self.namespace) as watch:
            sub = watch.subscribe(self.name)
            try:
                try:
                    await asyncio.wait_for(watch.synced.wait(), self._remaining())
                except asyncio.TimeoutError:
                    return self._timeout()
                while True:
                    jobset = sub.current()
                    if jobset is None:
                        try:
                            jobset = await watch.client.get_jobset(
                                self.name, namespace=self.namespace
                            )
                        except NotFound:
                            return self._event("gone", message=f"{self._what()} was deleted")
                    if self.uid and jobset.metadata.uid != self.uid:
                        return self._event(
                            "gone",
                            message=f"{self._what()} was replaced (uid {jobset.metadata.uid})",
                        )
                    step = tracker.observe(jobset)
                    if step.progress is not None:
                        self.log.info("%s %s", self._what(), step.progress.line())
                    if step.done or step.outcome.phase.value in self.target_phases:
                        break
                    if not await sub.changed(self._remaining()):
                        return self._timeout()
            finally:
                sub.close()
            outcome = step.outcome
            if step.restarted:
                outcome = restart_details(outcome, jobset)
            elif outcome.phase.terminal:
                outcome = await self._with_result(watch.client, outcome)
        return self._event("outcome", outcome=outcome)

    async def _with_result(self, client: Any, outcome: Any) -> Any:
        from jobset_core.backends._base import Handle
        from jobset_core.backends.controller import AsyncControllerBackend

        handle = Handle(self.name, self.namespace, outcome.uid or self.uid, "controller")
        final = await AsyncControllerBackend(client).status(handle)
        return outcome.model_copy(update={"result": final.result})

    async def _run_native(self, config: ConnectionConfig) -> JobSetEvent:
        from airflow_provider_jobset._shared import lease_client
        from jobset_core.backends._base import Handle
        from jobset_core.backends.native import AsyncNativeBackend
        from jobset_core.errors import IdentityMismatch, NotFound, WaitTimeout

        handle = Handle(self.name, self.namespace, self.uid, "native")
        async with lease_client(config.key(), config.client_settings()) as client:
            backend = AsyncNativeBackend(client, poll_interval=self.poll_interval)
            try:
                if self.target_phases:
                    outcome = await self._poll_phases(backend, handle)
                    if outcome is None:
                        return self._timeout()
                else:
                    outcome = await backend.wait(
                        handle,
                        timeout=self._remaining(),
                        on_restart=self.on_restart,
                        on_progress=lambda p: self.log.info("%s %s", self._what(), p.line()),
                    )
            except WaitTimeout:
                return self._timeout()
            except (NotFound, IdentityMismatch) as err:
                return self._event("gone", message=str(err))
        return self._event("outcome", outcome=outcome)

    async def _poll_phases(self, backend: Any, handle: Any) -> Any:
        while True:
            outcome = await backend.status(handle)
            if outcome.phase.terminal or outcome.phase.value in self.target_phases:
                return outcome
            remaining = self._remaining()
            if remaining is not None and remaining <= 0:
                return None
            await asyncio.sleep(min(self.poll_interval, remaining or self.poll_interval))

    # ------------------------------------------------------------------ kill

    async def on_kill(self) -> None:
        """A user killed the deferred task: delete the JobSet (one request, bounded)."""
        if not self.delete_on_kill:
            return
        from airflow_provider_jobset._backends import async_backend
        from airflow_provider_jobset._shared import lease_client
        from jobset_core.backends._base import Handle
        from jobset_core.errors import NotFound

        config = await self._hook().aget_config()
        async with lease_client(config.key(), config.client_settings()) as client:
            backend = await async_backend(client, self.backend)
            try:
                await asyncio.wait_for(
                    backend.cancel(Handle(self.name, self.namespace, self.uid, self.backend)),
                    _KILL_TIMEOUT,
                )
                self.log.info("deleted %s (task killed by a user)", self._what())
            except NotFound:
                self.log.info("%s was already gone", self._what())

    async def cleanup(self) -> None:
        """Release local resources only: a triggerer restart must never delete the JobSet."""
