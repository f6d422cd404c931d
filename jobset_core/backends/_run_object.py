"""What both backends do the same way with the one object a run is known by (the JobSet, or
the native anchor ConfigMap): create it or adopt it, find it, delete it.

:class:`RunObjectBackend` holds those steps once; a backend names its resource and says how
its object is built from a JobSet and read back (:meth:`~RunObjectBackend._body`,
:meth:`~RunObjectBackend._submission`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from jobset_core import identity as ident
from jobset_core import labels
from jobset_core.backends._base import Handle, Submission
from jobset_core.errors import Conflict, NotFound
from jobset_core.models import JobSet
from jobset_core.outcome import Backend
from jobset_core.render import Probe, run_object_probe
from jobset_core.resources import JOB, POD, SERVICE, ApiResource

if TYPE_CHECKING:
    from jobset_core.client import Client

__all__ = ["RunObjectBackend"]

#: Creates of a run object that met a namesake which was gone when read (a namesake being
#: deleted goes at any moment): then the create is tried again.
_VANISHED_RETRIES = 3


class RunObjectBackend:
    """Create-or-adopt, attach, find, cancel and leftovers over one kind of run object.

    The JobSet a backend creates was prepared by the lifecycle (named, labelled, given the
    workload's variables and validated, once): the backend only checks what it cannot run.

    Args:
        client: The API client (not closed by the backend).
    """

    kind: Backend
    resource: ApiResource

    def __init__(self, client: Client) -> None:
        self._client = client

    # ------------------------------------------------------------------ what differs

    def _body(self, named: JobSet, namespace: str, marks: Mapping[str, str]) -> Any:
        """The object to create for a named, labelled and valid JobSet."""
        raise NotImplementedError

    def _submission(
        self, obj: Mapping[str, Any], *, created: bool, marks: Mapping[str, str]
    ) -> Submission:
        """A submission of the object as the API server answered."""
        raise NotImplementedError

    def _not_ours(self, obj: Mapping[str, Any]) -> str | None:
        """Why an object of the run's name can never be this backend's run object."""
        return None

    def _check_supported(self, named: JobSet) -> None:
        """Refuse what the backend cannot run (raises ``SpecError``)."""

    def _selector(self, label_selector: Any) -> Any:
        """The label selector that finds run objects matching the user's selector."""
        return label_selector

    def _children(self, jobset: JobSet, namespace: str) -> list[Probe]:
        """The child objects as probes (see :meth:`child_probes`)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ the steps

    def probes(self, prepared: JobSet, *, marks: Mapping[str, str]) -> Probe:
        """The run object ``submit`` would create, as a dry-run probe.

        Raises:
            SpecError: the JobSet uses what the backend cannot do.
        """
        self._check_supported(prepared)
        namespace = prepared.metadata.namespace or ""
        return run_object_probe(self.resource, self._body(prepared, namespace, marks))

    def child_probes(self, jobset: JobSet) -> list[Probe]:
        """The run's child objects, as dry-run probes (see ``BackendProtocol``)."""
        return self._children(jobset, jobset.metadata.namespace or "")

    async def submit(
        self,
        prepared: JobSet,
        *,
        marks: Mapping[str, str],
        expected_uid: str | None = None,
    ) -> Submission:
        """Create the run object of a prepared JobSet (named, labelled with ``marks``, valid),
        or adopt the existing one when its identity labels (and UID, when given) match. A
        namesake that is gone by the time the create's 409 is followed up (it was being
        deleted) is no answer: the create is tried again.

        Raises:
            SpecError: the JobSet uses what the backend cannot do (nothing created).
            IdentityMismatch: an object of that name exists but is not this run's.
            Conflict: a namesake met every create and was gone each time it was read.
        """
        namespace = prepared.metadata.namespace or ""
        self._check_supported(prepared)
        body = self._body(prepared, namespace, marks)
        for _ in range(_VANISHED_RETRIES):
            try:
                created = await self._client.create(self.resource, body, namespace=namespace)
            except Conflict:
                try:
                    existing = await self._client.get(
                        self.resource, prepared.name, namespace=namespace
                    )
                except NotFound:
                    continue  # the namesake went between the 409 and the read: create again
                self._check(existing, namespace, prepared.name, marks, expected_uid)
                return self._submission(existing, created=False, marks=marks)
            return self._submission(created, created=True, marks=marks)
        raise Conflict(
            409,
            "Conflict",
            f"{self.resource.kind} {namespace}/{prepared.name} keeps being created and deleted "
            f"by someone else ({_VANISHED_RETRIES} creates met it, then it was gone)",
        )

    async def attach(
        self,
        name: str,
        *,
        namespace: str,
        uid: str | None = None,
        identity: Mapping[str, str] | None = None,
    ) -> Submission:
        """Reattach by name; with ``uid`` or ``identity`` the object must match them.

        Raises:
            NotFound: there is no such object.
            IdentityMismatch: it is not a run object of this backend, or not this run's.
        """
        existing = await self._client.get(self.resource, name, namespace=namespace)
        marks = ident.identity_labels(identity)
        why = self._not_ours(existing)
        if why is not None or uid or identity:
            self._check(existing, namespace, name, marks, uid)
        return self._submission(existing, created=False, marks=marks)

    async def find(self, *, namespace: str, label_selector: Any) -> list[Submission]:
        """Every run in ``namespace`` whose labels match the selector."""
        found = await self._client.list(
            self.resource, namespace=namespace, label_selector=self._selector(label_selector)
        )
        return [self._submission(obj, created=False, marks={}) for obj in found.items]

    def _check(
        self,
        obj: Mapping[str, Any],
        namespace: str,
        name: str,
        marks: Mapping[str, str],
        uid: str | None,
    ) -> None:
        from jobset_core.errors import IdentityMismatch

        why = self._not_ours(obj)
        if why is not None:
            raise IdentityMismatch(self.resource.kind, namespace, name, why)
        meta = obj.get("metadata") or {}
        problem = ident.adoption_problem(
            kind=self.resource.kind,
            namespace=namespace,
            name=name,
            labels=meta.get("labels"),
            uid=meta.get("uid"),
            expected_labels=marks,
            expected_uid=uid,
        )
        if problem is not None:
            raise problem

    @property
    def writing(self) -> bool:
        """Nothing goes on after a drive (the native backend's settled writes do)."""
        return False

    async def flush(self) -> None:
        """Nothing goes on after a drive (the native backend's settled writes do)."""

    async def cancel(self, handle: Handle) -> None:
        """One DELETE of the run object (Foreground, UID precondition): everything of the run
        follows by garbage collection. Already gone is fine."""
        with contextlib.suppress(NotFound, Conflict):
            await self._client.delete(
                self.resource,
                handle.name,
                namespace=handle.namespace,
                propagation="Foreground",
                uid=handle.uid or None,
            )

    async def leftovers(self, handle: Handle) -> list[str]:
        """What of the run still exists: its object, Jobs, pods and Service."""
        ns, client = handle.namespace, self._client
        selector = {labels.JOBSET_NAME: handle.name}
        heads = await client.list(
            self.resource, namespace=ns, field_selector={"metadata.name": handle.name}
        )
        left = [
            f"{self.resource.kind.lower()}/{handle.name}"
            for obj in heads.items
            if (obj.get("metadata") or {}).get("uid") == handle.uid
        ]
        return left + ident.leftovers(
            handle.uid,
            jobs=(await client.list(JOB, namespace=ns, label_selector=selector)).items,
            pods=(await client.list(POD, namespace=ns, label_selector=selector)).items,
            services=(await client.list(SERVICE, namespace=ns)).items,
        )
