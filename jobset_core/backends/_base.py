"""The contract both backends keep (async; synchronous callers go through
:func:`jobset_core.blocking.run`).

A backend turns a JobSet into running child objects on a cluster:

- ``controller``: submits the JobSet resource; the upstream controller does the rest.
- ``native``: keeps the JobSet in an anchor ConfigMap and creates the headless Service and
  child Jobs itself (clusters without the controller), applying the same pure policies in
  reconcile passes that every waiter drives.

Waiting is not the backend's business: the one observer (:mod:`jobset_core.observe`) and the
one judge (:mod:`jobset_core.lifecycle`) do it for both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from jobset_core.models import JobSet, JobSetStatus
from jobset_core.outcome import Backend, Outcome

if TYPE_CHECKING:
    from jobset_core.observe import Kind, Observation, Target
    from jobset_core.render import Probe

__all__ = [
    "BACKEND_CHOICES",
    "BackendChoice",
    "BackendProtocol",
    "Handle",
    "Pass",
    "Remember",
    "Submission",
]

#: Hands an object the backend wrote (a create's or patch's answer) back to the observer.
Remember = Callable[["Kind", Mapping[str, Any]], None]

#: What a caller may ask for: ``auto`` is ``controller`` when the cluster serves
#: ``jobset.x-k8s.io/v1alpha2``, else ``native``.
BackendChoice = Literal["auto", "controller", "native"]
BACKEND_CHOICES: tuple[BackendChoice, ...] = ("auto", "controller", "native")


@dataclass(frozen=True)
class Handle:
    """Which JobSet a run is: enough to reattach from another process.

    Attributes:
        name: The JobSet's (and a native run's anchor's) name.
        namespace: Its namespace.
        uid: Its UID (the anchor's for a native run); ``""`` when not known yet.
        backend: ``controller`` or ``native``.
    """

    name: str
    namespace: str
    uid: str
    backend: Backend


@dataclass(frozen=True)
class Submission:
    """The result of ``submit``.

    Attributes:
        handle: The run.
        created: Whether this call created it (``False``: an existing run with matching
            identity was adopted).
        outcome: The run's state as the create (or the adoption's read) answered.
        identity: The identity labels it carries.
        obj: The JobSet (or anchor) as the API server answered.
        refused: ``(reason, message)`` when the first reconcile pass of a native run just
            created met a child object the cluster refuses (a quota): the verdict is known.
    """

    handle: Handle
    created: bool
    outcome: Outcome
    identity: Mapping[str, str] = field(default_factory=dict)
    obj: Mapping[str, Any] = field(default_factory=dict, repr=False)
    refused: tuple[str, str] | None = None

    @property
    def since(self) -> str | None:
        """The ``resourceVersion`` the run was created at (``None`` when adopted: its
        objects may be older)."""
        if not self.created:
            return None
        meta = self.obj.get("metadata") or {}
        return str(meta.get("resourceVersion") or "") or None


@dataclass(frozen=True)
class Pass:
    """What one drive of a run did (native reconcile passes; nothing for the controller).

    Attributes:
        acted: It changed something on the cluster (drive again once that is observed).
        restarted: The failure policy decided a restart in this pass.
        finished: The run is terminal and cleaned up after (upstream's ``Finished``).
        deleted: The run's TTL expired and its anchor was deleted.
        linger: Seconds until the TTL expires, when a waiter should stay for it.
        failure: ``(reason, message)`` of a child object that cannot be created.
        blocked: A child object could not be created because a namesake of an older run is
            still going: drive again when something changes or after a backoff, not at once.
    """

    acted: bool = False
    restarted: bool = False
    finished: bool = False
    deleted: bool = False
    linger: float | None = None
    failure: tuple[str, str] | None = None
    blocked: bool = False


class BackendProtocol(Protocol):
    """What the lifecycle asks of a backend."""

    kind: Backend

    async def submit(
        self,
        prepared: JobSet,
        *,
        marks: Mapping[str, str],
        expected_uid: str | None = None,
    ) -> Submission:
        """Create the run of a prepared JobSet (named, labelled with its identity ``marks``,
        given the workload's variables and validated, by the lifecycle), or adopt the existing
        one when its identity labels (and UID, when given) match; raise ``IdentityMismatch``
        otherwise. Never creates a duplicate."""
        ...

    def probes(self, prepared: JobSet, *, marks: Mapping[str, str]) -> Probe:
        """The run object ``submit`` would create, as a probe for a server-side dry run
        (raises ``SpecError`` for what the backend cannot run, as ``submit`` would)."""
        ...

    def child_probes(self, jobset: JobSet) -> list[Probe]:
        """The child objects the run will create as the run's identity, as probes (the
        controller creates the Jobs itself: their pods still matter, and the Jobs show how a
        namespace's policies see them); ``jobset`` as the server answered the run object's
        dry run, else as prepared."""
        ...

    async def attach(
        self,
        name: str,
        *,
        namespace: str,
        uid: str | None = None,
        identity: Mapping[str, str] | None = None,
    ) -> Submission:
        """Reattach to an existing run by name (+ UID / identity checks)."""
        ...

    async def find(self, *, namespace: str, label_selector: Any) -> list[Submission]:
        """Every run in ``namespace`` whose labels match the selector."""
        ...

    def target(self, handle: Handle, *, since: str | None = None, seeds: Any = ()) -> Target:
        """What the observer tracks for this run."""
        ...

    async def drive(
        self, handle: Handle, observation: Observation, *, create: bool, remember: Remember
    ) -> Pass:
        """Move the run on from what was observed (native reconcile; nothing for the
        controller)."""
        ...

    @property
    def writing(self) -> bool:
        """Whether writes a drive left going after its verdict are still on their way."""
        ...

    async def flush(self) -> None:
        """Wait for the writes a drive left going after its verdict (native: a settled
        status on its way to the anchor)."""
        ...

    async def set_suspend(self, handle: Handle, suspend: bool) -> None:
        """Suspend (``True``) or resume the run."""
        ...

    async def cancel(self, handle: Handle) -> None:
        """One quick DELETE (foreground propagation, UID precondition); gone is fine."""
        ...

    async def leftovers(self, handle: Handle) -> list[str]:
        """What of the run still exists, as ``kind/name``."""
        ...

    def status_of(self, observation: Observation) -> JobSetStatus:
        """The run's status in the JobSet status shape."""
        ...
