"""``JobSetSensor``: wait for an existing JobSet to reach a phase (poke or deferrable).

The JobSet is named (``name``) or selected by labels (``label_selector``: every matching
JobSet must reach a target phase, and at least one must exist), on either backend. A JobSet
that ends in a phase that is not a target fails the sensor (no retry); one that does not exist
yet keeps it waiting.

Every look goes through the core's lifecycle: in ``poke`` mode a poke waits (up to
``poke_interval``) with the core's one wait, so the sensor answers as soon as the JobSet gets
there instead of at the next poke; ``reschedule`` takes one look; deferrable waits in the
triggerer with :class:`~.triggers.JobSetTrigger`.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from airflow_provider_jobset._arguments import (
    CONNECTION_FIELDS,
    check_rendered,
    check_sensor_arguments,
    checked,
)
from airflow_provider_jobset._compat import (
    AirflowFailException,
    BaseSensorOperator,
    Deferrable,
)
from airflow_provider_jobset._decisions import LOOK_AGAIN
from airflow_provider_jobset.exceptions import NEVER_RETRIED
from airflow_provider_jobset.hooks import JobSetHook
from jobset_core import lifecycle as core
from jobset_core.lifecycle import (
    DEFAULT_GRACE,
    BackendChoice,
    Deadline,
    OnPreemption,
    RunRequest,
    Verdict,
    error_for,
)
from jobset_core.outcome import Outcome, Phase
from jobset_core.policy.queue import ADMISSION_TIMEOUT

if TYPE_CHECKING:
    from jobset_core.lifecycle import Handle, Lifecycle

__all__ = ["JobSetSensor", "SensorState", "sensor_state"]


@dataclass(frozen=True)
class SensorState:
    """Where the sensor stands.

    Attributes:
        kind: ``done`` (every JobSet is in a target phase, and there is one), ``waiting``
            or ``failed`` (one ended in a phase that is not a target).
        message: Why, in words.
        waiting: The first JobSet not in a target phase yet (``None``: none exists yet).
    """

    kind: Literal["done", "waiting", "failed"]
    message: str = ""
    waiting: Outcome | None = None


def sensor_state(outcomes: Sequence[Outcome], targets: Sequence[str]) -> SensorState:
    """Judge the looked-at JobSets against the target phases (pure)."""
    if not outcomes:
        return SensorState("waiting", "no JobSet matches yet")
    for outcome in outcomes:
        if outcome.phase.value in targets:
            continue
        what = f"JobSet {outcome.namespace}/{outcome.name}"
        if outcome.phase.terminal:
            return SensorState(
                "failed",
                f"{what} ended {outcome.phase.value} ({outcome.reason}), not "
                f"{' or '.join(targets)}",
            )
        return SensorState("waiting", f"{what} is {outcome.phase.value}", outcome)
    return SensorState("done", "every JobSet is " + " or ".join(targets))


class JobSetSensor(BaseSensorOperator):
    """Wait until a JobSet (or every JobSet matching labels) reaches a target phase.

    Args:
        name: The JobSet's name.
        label_selector: Labels selecting the JobSets instead (``{"team": "ml"}``).
        namespace: Their namespace (default: the connection's / kubeconfig's).
        target_phases: Phases that satisfy the sensor (default ``("Completed",)``).
        backend: ``auto`` (JobSets and native runs), ``controller`` or ``native``.
        kubernetes_conn_id: An Airflow ``kubernetes`` connection.
        config_file: A kubeconfig file (overrides the connection).
        cluster_context: A kubeconfig context (overrides the connection).
        in_cluster: Use the pod's service account (overrides the connection).
        deferrable: Wait in the triggerer (default ``[operators] default_deferrable``).
        start_grace: How long a container of a watched JobSet may wait with
            ``ErrImagePull``, ``CreateContainerConfigError``... before the sensor fails
            (``PodsCannotStart``; a ``timedelta`` or seconds; 0: at once; ``None``: never).
        pending_timeout: How long a pod may stay unschedulable before the sensor fails
            (default: never).
        crash_loop_restarts: Fail once a crash-looping container restarted this many times
            (default: never).
        admission_timeout: How long a watched JobSet that a Kueue queue holds may wait for
            admission, from the sensor's start and again from each eviction (fails with
            ``AdmissionTimeout``; default: no limit). A deactivated Workload, or a request no
            quota can ever hold, fails the sensor at once (``QueueRefused``).
        on_preemption: When Kueue preempts a watched JobSet: ``wait`` (default), ``retry``
            (``JobSetPreempted``, retried) or ``fail`` (``QueueRefused``).
        **kwargs: Other ``BaseSensorOperator`` arguments (``poke_interval``, ``timeout``...).
    """

    template_fields: Sequence[str] = ("name", "namespace", "label_selector", *CONNECTION_FIELDS)
    deferrable = Deferrable()

    def __init__(
        self,
        *,
        name: str | None = None,
        label_selector: Mapping[str, str] | None = None,
        namespace: str | None = None,
        target_phases: Sequence[str] = ("Completed",),
        backend: BackendChoice = "auto",
        kubernetes_conn_id: str | None = JobSetHook.default_conn_name,
        config_file: str | None = None,
        cluster_context: str | None = None,
        in_cluster: bool | None = None,
        deferrable: bool | None = None,
        start_grace: _dt.timedelta | float | None = _dt.timedelta(seconds=DEFAULT_GRACE),
        pending_timeout: _dt.timedelta | float | None = None,
        crash_loop_restarts: int | None = None,
        admission_timeout: _dt.timedelta | float | None = None,
        on_preemption: OnPreemption = "wait",
        **kwargs: Any,
    ) -> None:
        owner = "JobSetSensor"
        checked(
            owner,
            check_sensor_arguments,
            name=name,
            label_selector=label_selector,
            namespace=namespace,
            target_phases=target_phases,
            phases=[phase.value for phase in Phase],
            kubernetes_conn_id=kubernetes_conn_id,
            config_file=config_file,
            cluster_context=cluster_context,
            in_cluster=in_cluster,
            deferrable=deferrable,
        )
        #: What every look asks of the core (never deleting: the sensor does not own it).
        self.request: RunRequest = checked(
            owner,
            lambda: RunRequest(
                backend=backend,
                until=frozenset(Phase(p) for p in target_phases),
                pod_start=core.pod_start_rules(
                    start_grace=start_grace,
                    pending_timeout=pending_timeout,
                    crash_loop_restarts=crash_loop_restarts,
                ),
                cancel_on_kill=False,
                deadline=Deadline(
                    admission_timeout=core.seconds(
                        admission_timeout, "admission_timeout", positive=True
                    )
                ),
                on_preemption=on_preemption,
            ),
        )
        super().__init__(**kwargs)
        self.name = name
        self.label_selector = dict(label_selector) if label_selector else None
        self.namespace = namespace
        self.target_phases = list(target_phases)
        self.backend = backend
        self.kubernetes_conn_id = kubernetes_conn_id
        self.config_file = config_file
        self.cluster_context = cluster_context
        self.in_cluster = in_cluster
        self.deferrable = deferrable

    def render_template_fields(self, context: Any, jinja_env: Any = None) -> None:
        """Render the templated fields, then check what they became (a wrong value fails the
        sensor, no retry)."""
        super().render_template_fields(context, jinja_env)
        try:
            check_rendered("JobSetSensor", **{f: getattr(self, f) for f in self.template_fields})
        except (TypeError, ValueError) as err:
            raise AirflowFailException(str(err)) from err

    @property
    def hook(self) -> JobSetHook:
        """The hook over the sensor's connection."""
        return JobSetHook.of(self)

    # ------------------------------------------------------------------ looking

    def _look(self, context: Any, *, wait: float) -> tuple[SensorState, Handle | None]:
        """Look at every selected JobSet; with ``wait`` > 0, wait up to that many seconds for
        the first unfinished one to change, then look again."""
        hook = self.hook
        namespace = self.namespace or hook.default_namespace()
        request = self.request.but(namespace=namespace, deadline=self._deadline(context))
        settings = hook.get_config().client_settings()
        return core.blocking(settings, lambda lifecycle: self._alook(lifecycle, request, wait))

    def _deadline(self, context: Any) -> Deadline:
        """The sensor's limits, counted from its start (the first poke's, when rescheduled):
        ``admission_timeout`` for a watched JobSet's wait for its queue, and its own
        ``timeout`` (queue time included, as a sensor's timeout always is)."""
        ti = context.get("ti") if isinstance(context, Mapping) else None
        begun = getattr(ti, "start_date", None)
        started = begun.timestamp() if begun is not None else time.time()
        return dataclasses.replace(
            self.request.deadline, started=started, not_after=started + float(self.timeout)
        )

    async def _alook(
        self, lifecycle: Lifecycle, request: RunRequest, wait: float
    ) -> tuple[SensorState, Handle | None]:
        ends = time.time() + wait
        seen: list[tuple[Handle, Outcome]] | None = None
        while True:
            if seen is None:
                seen = await self._seen(lifecycle, request)
            state = sensor_state([o for _, o in seen], self.target_phases)
            first = next((h for h, o in seen if o is state.waiting), None)
            if state.kind != "waiting" or first is None or time.time() >= ends:
                return state, first
            poke = dataclasses.replace(
                request.deadline, not_after=min(ends, request.deadline.not_after or ends)
            )
            verdict = await lifecycle.wait(request.but(deadline=poke), first)
            if verdict.kind == "timeout" and verdict.reason != ADMISSION_TIMEOUT:
                seen = None  # a poke's own time being up says nothing
                continue
            self.log.info("%s", verdict.message)
            if verdict.kind in ("creation_failed", "gone", "timeout", "refused", "preempted"):
                # It can never reach a target phase now: end the sensor as the operator would.
                raise _failure(verdict)
            if verdict.outcome is None:
                seen = None
            else:  # the others were just looked at: only the one waited for changed
                seen = [(h, verdict.outcome if h == first else o) for h, o in seen]

    async def _seen(
        self, lifecycle: Lifecycle, request: RunRequest
    ) -> list[tuple[Handle, Outcome]]:
        """Each JobSet the sensor watches, with its outcome now (saying a verdict it has)."""
        from jobset_core.errors import JobSetGone
        from jobset_core.lifecycle import WaitRules

        rules = WaitRules(
            until=request.until,
            pod_start=request.pod_start,
            deadline=request.deadline,
            on_preemption=request.on_preemption,
        )
        seen: list[tuple[Handle, Outcome]] = []
        for handle in await self._handles(lifecycle, request.namespace):
            try:
                outcome, verdict = await lifecycle.runs.look(handle, rules)
            except JobSetGone:
                continue
            if verdict is not None:  # the judge's words, as every other way says them
                self.log.info("%s", verdict.message)
                if verdict.kind == "refused":  # its queue will never run it
                    raise _failure(verdict)
            seen.append((handle, outcome))
        return seen

    async def _handles(self, lifecycle: Lifecycle, namespace: str) -> list[Handle]:
        from jobset_core.errors import NotFound

        runs = lifecycle.runs
        if self.name:
            try:
                found = await runs.locate(self.name, namespace=namespace, backend=self.backend)
            except NotFound:
                return []
            return [found.handle]
        found_all = await runs.find(
            namespace=namespace, label_selector=self.label_selector, backend=self.backend
        )
        return [f.handle for f in found_all]

    # ------------------------------------------------------------------ modes

    def poke(self, context: Any) -> bool:
        """One look (``poke`` mode: waiting up to ``poke_interval`` for the answer)."""
        wait = float(self.poke_interval) if self.mode == "poke" else 0.0
        state, _ = self._look(context, wait=wait)
        self.log.info("%s", state.message)
        if state.kind == "failed":
            raise AirflowFailException(state.message)
        return state.kind == "done"

    def execute(self, context: Any) -> Any:
        """Poke; deferrable: wait in the triggerer for the first unfinished JobSet."""
        if not self.deferrable:
            return super().execute(context)
        return self._look_or_defer(context)

    def _look_or_defer(self, context: Any) -> None:
        from airflow_provider_jobset.triggers import JobSetTrigger, LookAgainTrigger, resume_guard

        state, waiting = self._look(context, wait=0.0)
        self.log.info("%s", state.message)
        if state.kind == "failed":
            raise AirflowFailException(state.message)
        if state.kind == "done":
            return
        if waiting is None:  # nothing exists yet: look again after poke_interval
            self.defer(
                trigger=LookAgainTrigger(
                    moment=time.time() + float(self.poke_interval), resume_guard=resume_guard()
                ),
                method_name="execute_complete",
            )
        deadline = self._deadline(context)
        self.defer(
            trigger=JobSetTrigger(
                handle=waiting,
                request=self.request.but(namespace=waiting.namespace, deadline=deadline),
                kubernetes_conn_id=self.kubernetes_conn_id,
                config_file=self.config_file,
                cluster_context=self.cluster_context,
                in_cluster=self.in_cluster,
                resume_guard=resume_guard(),
            ),
            method_name="execute_complete",
        )

    def execute_complete(self, context: Any, event: Mapping[str, Any] | None = None) -> None:
        """Resume: check everything again (another JobSet of the selector may still run).
        ``event`` is a verdict, or the look-again of a sensor that found nothing."""
        is_verdict = isinstance(event, Mapping) and event.get("kind") != LOOK_AGAIN
        verdict = Verdict.model_validate(event) if is_verdict else None
        if (
            verdict is not None
            and verdict.kind == "timeout"
            and verdict.reason != ADMISSION_TIMEOUT
        ):
            raise AirflowFailException(f"sensor timed out: {verdict.message}")
        if verdict is not None and verdict.kind in ("refused", "preempted", "timeout"):
            raise _failure(verdict)  # a queue's: as a poke says it
        self._look_or_defer(context)


def _failure(verdict: Verdict) -> Exception:
    """The error a verdict that ends the sensor raises: wrapped in ``AirflowFailException``
    when no retry can help (a queue that will not run the JobSet), as the operator does."""
    error: Exception = error_for(verdict) or RuntimeError(verdict.message)
    if isinstance(error, NEVER_RETRIED):
        failure = AirflowFailException(str(error))
        failure.__cause__ = error
        return failure
    return error
