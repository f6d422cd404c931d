"""The ``controller`` backend: submit the JobSet resource; the upstream controller runs it.

Submitting validates the JobSet, names and labels it for its identity and creates it (the
answer carries the webhook's defaults: the first status needs no further request); an existing
JobSet of that name is adopted only when its identity labels (and UID, when known) match
(:class:`~jobset_core.backends._run_object.RunObjectBackend`). Everything after that is the
controller's work; what waiters need they read from the observer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobset_core.backends._base import Handle, Pass, Remember, Submission
from jobset_core.backends._run_object import RunObjectBackend
from jobset_core.models import JobSet, JobSetStatus
from jobset_core.observe import Observation, Target
from jobset_core.outcome import Backend
from jobset_core.policy import outcome as rules
from jobset_core.render import Probe, child_probes
from jobset_core.resources import JOBSET

__all__ = ["ControllerBackend"]


class ControllerBackend(RunObjectBackend):
    """Runs JobSets through the upstream JobSet controller (see
    :class:`~jobset_core.backends._run_object.RunObjectBackend` for the arguments)."""

    kind: Backend = "controller"
    resource = JOBSET

    def _body(self, named: JobSet, namespace: str, marks: Mapping[str, str]) -> Any:
        return named

    def _children(self, jobset: JobSet, namespace: str) -> list[Probe]:
        return child_probes(jobset, namespace, placement="webhook", service=False)

    def _submission(
        self, obj: Mapping[str, Any], *, created: bool, marks: Mapping[str, str]
    ) -> Submission:
        jobset = JobSet.model_validate(obj)
        meta = jobset.metadata
        handle = Handle(jobset.name, meta.namespace or "", meta.uid or "", self.kind)
        outcome = rules.build_outcome(jobset, self.kind)
        return Submission(handle, created, outcome, dict(marks), obj)

    def target(self, handle: Handle, *, since: str | None = None, seeds: Any = ()) -> Target:
        """Track the JobSet, its Jobs, pods and Warning Events."""
        return Target("controller", handle.namespace, handle.name, since, tuple(seeds), handle.uid)

    async def drive(
        self, handle: Handle, observation: Observation, *, create: bool, remember: Remember
    ) -> Pass:
        """Nothing to do: the controller drives the run."""
        return Pass()

    def status_of(self, observation: Observation) -> JobSetStatus:
        """The JobSet's ``status`` as the controller wrote it."""
        found = observation.jobset
        return JobSetStatus.model_validate((found or {}).get("status") or {})

    async def set_suspend(self, handle: Handle, suspend: bool) -> None:
        """Suspend (``True``) or resume the run by patching ``spec.suspend``."""
        await self._client.patch(
            JOBSET, handle.name, {"spec": {"suspend": suspend}}, namespace=handle.namespace
        )
