"""``JobSetTrigger``: wait for a JobSet asynchronously in the triggerer.

The trigger runs the core's one wait (:meth:`jobset_core.lifecycle.Run.wait`, the same the
worker runs) through the observer its triggerer process shares per cluster
(:func:`jobset_core.observe.shared_observer`): every trigger of the process shares one client
and one informer per kind (cluster-wide when the identity may watch every namespace, else one
per namespace), for both backends. A native run is driven (reconciled) by the trigger that
waits for it.

The trigger fires one event: the wait's :class:`~jobset_core.lifecycle.Verdict`. ``cleanup()``
never deletes anything (it runs on every triggerer restart); ``on_kill()`` (Airflow 3.3+,
called only when a user marks or clears the deferred task) deletes the JobSet with one request.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Literal

from airflow_provider_jobset._compat import BaseTrigger, TriggerEvent
from airflow_provider_jobset.hooks import JobSetHook
from jobset_core.lifecycle import Handle, LogLine, LogOptions, Run, WaitRules
from jobset_core.observe import shared_observer
from jobset_core.outcome import Phase
from jobset_core.policy.pod_start import PodStartRules

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
        deadline: Epoch seconds after which the trigger fires a ``timeout`` verdict.
        on_restart: ``return``: fire when ``status.restarts`` grows past ``restarts``;
            ``continue``: keep waiting through restarts.
        restarts: The restarts the caller already saw (the baseline for ``on_restart``).
        target_phases: Also fire when the JobSet's phase is one of these (sensors).
        delete_on_kill: Delete the JobSet when a user kills the deferred task.
        timeout_seconds: The timeout the task was given (what a ``timeout`` verdict says).
        pod_start: The pod start rules (:meth:`PodStartRules.to_dict`; default: the core's).
        logs: Follow pod logs while waiting (:meth:`LogOptions.to_dict`; ``None``: do not).
            The lines go to the trigger's log, which Airflow shows in the task's log; how
            far each log was read is kept on the run, so a trigger that a restarted
            triggerer runs again continues without repeating a line.
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
        timeout_seconds: float | None = None,
        pod_start: Mapping[str, Any] | None = None,
        logs: Mapping[str, Any] | None = None,
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
        self.timeout_seconds = timeout_seconds
        self.pod_start = dict(pod_start) if pod_start is not None else None
        self.logs = dict(logs) if logs is not None else None

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
                "timeout_seconds": self.timeout_seconds,
                "pod_start": self.pod_start,
                "logs": self.logs,
            },
        )

    def _hook(self) -> JobSetHook:
        return JobSetHook(
            self.kubernetes_conn_id,
            config_file=self.config_file,
            cluster_context=self.cluster_context,
            in_cluster=self.in_cluster,
        )

    def _what(self) -> str:
        return f"JobSet {self.namespace}/{self.name}"

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Wait, then fire exactly one event: the verdict."""
        config = await self._hook().aget_config()
        handle = Handle(self.name, self.namespace, self.uid, self.backend)
        rules = WaitRules(
            on_restart=self.on_restart,
            until=frozenset(Phase(p) for p in self.target_phases),
            baseline_restarts=self.restarts,
            budget=self.timeout_seconds,
            pod_start=PodStartRules.from_dict(self.pod_start or {}),
        )
        logs = None
        if self.logs is not None:  # resumable: a restarted triggerer goes on from there
            logs = dataclasses.replace(LogOptions.from_dict(self.logs), resume=True)
        async with shared_observer(config.client_settings()) as observer:
            verdict = await Run(observer).wait(
                handle,
                deadline=self.deadline,
                rules=rules,
                on_progress=lambda p: self.log.info("%s %s", self._what(), p.line()),
                logs=logs,
                on_log=self._log_line,
            )
        self.log.info("%s: %s", self._what(), verdict.message)
        yield TriggerEvent(verdict.to_payload())  # type: ignore[no-untyped-call]

    def _log_line(self, line: LogLine) -> None:
        self.log.info("%s", line.shown())

    async def on_kill(self) -> None:
        """A user killed the deferred task: delete the JobSet (one request, bounded)."""
        if not self.delete_on_kill:
            return
        config = await self._hook().aget_config()
        handle = Handle(self.name, self.namespace, self.uid, self.backend)
        async with shared_observer(config.client_settings()) as observer:
            await asyncio.wait_for(Run(observer).cancel(handle), _KILL_TIMEOUT)
        self.log.info("deleted %s (task killed by a user)", self._what())

    async def cleanup(self) -> None:
        """Release local resources only: a triggerer restart must never delete the JobSet."""
