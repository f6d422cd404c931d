"""``JobSetSensor``: wait for an existing JobSet to reach a phase (poke or deferrable).

The JobSet is named (``name``) or selected by labels (``label_selector``: every matching
JobSet must reach a target phase, and at least one must exist). A JobSet that ends in a phase
that is not a target fails the sensor (no retry); one that does not exist yet keeps it waiting.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_provider_jobset._arguments import check_rendered_sensor, check_sensor_arguments
from airflow_provider_jobset._compat import BaseSensorOperator, default_deferrable
from airflow_provider_jobset.events import JobSetEvent
from airflow_provider_jobset.exceptions import JobSetFailed
from airflow_provider_jobset.hooks import BackendChoice, JobSetHook
from jobset_core.outcome import Outcome, Phase

__all__ = ["JobSetSensor", "sensor_verdict"]


def sensor_verdict(outcomes: Sequence[Outcome], targets: Sequence[str]) -> bool | str:
    """``True`` when every outcome is in a target phase (and there is one), ``False`` to keep
    waiting, or the reason to fail (an outcome ended in a phase that is not a target)."""
    if not outcomes:
        return False
    for outcome in outcomes:
        if outcome.phase.value in targets:
            continue
        if outcome.phase.terminal:
            return (
                f"JobSet {outcome.namespace}/{outcome.name} ended {outcome.phase.value} "
                f"({outcome.reason}), not {' or '.join(targets)}"
            )
        return False
    return True


class JobSetSensor(BaseSensorOperator):
    """Wait until a JobSet (or every JobSet matching labels) reaches a target phase.

    Args:
        name: The JobSet's name.
        label_selector: Labels selecting the JobSets instead (``{"team": "ml"}``).
        namespace: Their namespace (default: the connection's / kubeconfig's).
        target_phases: Phases that satisfy the sensor (default ``("Completed",)``).
        backend: ``auto``, ``controller`` or ``native``.
        kubernetes_conn_id: An Airflow ``kubernetes`` connection.
        deferrable: Wait in the triggerer (default ``[operators] default_deferrable``).
        **kwargs: Other ``BaseSensorOperator`` arguments (``poke_interval``, ``timeout``...).
    """

    template_fields: Sequence[str] = ("name", "namespace", "label_selector")

    def __init__(
        self,
        *,
        name: str | None = None,
        label_selector: Mapping[str, str] | None = None,
        namespace: str | None = None,
        target_phases: Sequence[str] = ("Completed",),
        backend: BackendChoice = "auto",
        kubernetes_conn_id: str | None = JobSetHook.default_conn_name,
        deferrable: bool | None = None,
        **kwargs: Any,
    ) -> None:
        check_sensor_arguments(
            name=name,
            label_selector=label_selector,
            namespace=namespace,
            target_phases=target_phases,
            phases=[phase.value for phase in Phase],
            backend=backend,
            kubernetes_conn_id=kubernetes_conn_id,
            deferrable=deferrable,
        )
        super().__init__(**kwargs)
        self.name = name
        self.label_selector = dict(label_selector) if label_selector else None
        self.namespace = namespace
        self.target_phases = list(target_phases)
        self.backend = backend
        self.kubernetes_conn_id = kubernetes_conn_id
        self.deferrable = default_deferrable() if deferrable is None else deferrable

    def render_template_fields(self, context: Any, jinja_env: Any = None) -> None:
        """Render ``name``, ``namespace`` and ``label_selector``, then check what they became
        (a wrong value fails the sensor, no retry)."""
        super().render_template_fields(context, jinja_env)
        try:
            check_rendered_sensor(
                name=self.name, namespace=self.namespace, label_selector=self.label_selector
            )
        except (TypeError, ValueError) as err:
            raise JobSetFailed(str(err)) from err

    @property
    def hook(self) -> JobSetHook:
        """The hook over the sensor's connection."""
        return JobSetHook(self.kubernetes_conn_id, namespace=self.namespace)

    def _outcomes(self) -> list[Outcome]:
        from jobset_core.backends._base import Handle
        from jobset_core.errors import NotFound

        hook = self.hook
        namespace = self.namespace or hook.default_namespace()
        with hook.backend(self.backend) as backend:
            names: list[tuple[str, str]] = []
            if self.name:
                names = [(self.name, "")]
            else:
                with hook.get_client() as client:
                    found = client.list_jobsets(
                        namespace=namespace, label_selector=self.label_selector
                    )
                names = [(js.name, js.metadata.uid or "") for js in found.items]
            out = []
            for name, uid in names:
                try:
                    out.append(backend.status(Handle(name, namespace, uid, backend.kind)))
                except NotFound:
                    continue
            return out

    def poke(self, context: Any) -> bool:
        """One look: every selected JobSet in a target phase?"""
        outcomes = self._outcomes()
        for outcome in outcomes:
            self.log.info(
                "JobSet %s/%s is %s", outcome.namespace, outcome.name, outcome.phase.value
            )
        verdict = sensor_verdict(outcomes, self.target_phases)
        if isinstance(verdict, str):
            raise JobSetFailed(verdict)
        return verdict

    def execute(self, context: Any) -> Any:
        """Poke once; deferrable: wait in the triggerer for the first unfinished JobSet."""
        if not self.deferrable:
            return super().execute(context)
        return self._poke_or_defer(context)

    def _poke_or_defer(self, context: Any) -> None:
        from airflow_provider_jobset.triggers import JobSetTrigger

        outcomes = self._outcomes()
        verdict = sensor_verdict(outcomes, self.target_phases)
        if isinstance(verdict, str):
            raise JobSetFailed(verdict)
        if verdict:
            return
        waiting = next((o for o in outcomes if o.phase.value not in self.target_phases), None)
        if waiting is None:  # nothing exists yet: look again after poke_interval
            from airflow.providers.standard.triggers.temporal import TimeDeltaTrigger

            self.defer(
                trigger=TimeDeltaTrigger(_dt.timedelta(seconds=self.poke_interval)),
                method_name="execute_complete",
            )
        deadline = _dt.datetime.now(_dt.timezone.utc) + _dt.timedelta(seconds=self.timeout)
        self.defer(
            trigger=JobSetTrigger(
                name=waiting.name,
                namespace=waiting.namespace,
                uid=waiting.uid,
                backend=waiting.backend,
                kubernetes_conn_id=self.kubernetes_conn_id,
                deadline=deadline.timestamp(),
                on_restart="continue",
                target_phases=self.target_phases,
                delete_on_kill=False,
            ),
            method_name="execute_complete",
        )

    def execute_complete(self, context: Any, event: Mapping[str, Any] | None = None) -> None:
        """Resume: check everything again (another JobSet of the selector may still run)."""
        if event is not None and event.get("kind") == "timeout":
            fired = JobSetEvent.model_validate(event)
            raise JobSetFailed(f"sensor timed out: {fired.message}")
        self._poke_or_defer(context)
