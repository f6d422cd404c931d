"""Reading a run's pods, as pure functions over API-shaped pod objects.

:class:`PodView` is the one reading of a pod dict: its name, labels and indexes, its phase,
its containers (spec order) and their statuses, its conditions and its Job, each of the right
type whatever the input holds (a missing, ``None`` or wrong-typed field reads as absent,
never raises). The pod-start policy, the log plan, the failed pods' tails and the observer's
views read pods through it.

On it: which pod a target names (:func:`choose_log_pod`: replicated job, job index, completion
index, latest restart attempt), the run's result (:func:`termination_result`: the first
container's termination message), failed pods and their containers. Nothing here performs
I/O.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jobset_core import labels as L
from jobset_core.outcome import decode_result

if TYPE_CHECKING:
    from jobset_core.models import JobSet

__all__ = [
    "CRASH_LOOP",
    "UNSCHEDULABLE",
    "VIEWS_KEPT_FROM",
    "ContainerStatus",
    "PodCondition",
    "PodRef",
    "PodView",
    "PodViews",
    "Termination",
    "choose_log_pod",
    "failed_containers",
    "failed_pods",
    "log_pod_target",
    "mappings",
    "metadata",
    "object_labels",
    "pod_container",
    "termination_message",
    "termination_result",
]

#: The waiting reason of a container between crashes.
CRASH_LOOP = "CrashLoopBackOff"
#: The ``PodScheduled`` condition's reason when no node fits.
UNSCHEDULABLE = "Unschedulable"
_COMPLETION_INDEX_KEYS = (L.JOB_COMPLETION_INDEX,)
#: Runs of this many pods or more keep their pods' views from one look to the next (see
#: :class:`PodViews`).
VIEWS_KEPT_FROM = 32


# ------------------------------------------------------------------------------ raw reading


def _mapping(value: Any) -> Mapping[str, Any]:
    # A dict first: the ABC's isinstance check costs ~10x more (thousands of pods a step).
    return value if type(value) is dict or isinstance(value, Mapping) else {}


def mappings(value: Any) -> list[Mapping[str, Any]]:
    """The mappings of a list field (anything else in it, or a field that is no list, is
    skipped)."""
    if not isinstance(value, (list, tuple)):
        return []
    return [item for item in value if type(item) is dict or isinstance(item, Mapping)]


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """An object's ``metadata`` (empty when it has none, or one that is no mapping)."""
    return _mapping(obj.get("metadata")) if isinstance(obj, Mapping) else {}


def object_labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """An object's labels (empty when it has none, or ones that are no mapping)."""
    return _mapping(metadata(obj).get("labels"))


def _int_field(meta: Mapping[str, Any], key: str) -> int | None:
    # A label, else the annotation of the same key (the completion index is an annotation).
    for where in ("labels", "annotations"):
        value = _mapping(meta.get(where)).get(key)
        if value is not None:
            return _int(str(value))
    return None


# ------------------------------------------------------------------------------ the view


@dataclass(frozen=True)
class Termination:
    """How a container's run ended (``state.terminated`` or ``lastState.terminated``).

    Attributes:
        exit_code: The exit code (``None`` when the kubelet gave none).
        reason: The kubelet's reason (``Error``, ``OOMKilled``...), or ``""``.
        message: The termination message, or ``""``.
    """

    exit_code: int | None = None
    reason: str = ""
    message: str = ""

    @property
    def nonzero(self) -> bool:
        """Whether the container exited with a code other than 0."""
        return self.exit_code is not None and self.exit_code != 0

    @classmethod
    def of(cls, state: Any) -> Termination | None:
        """The ``terminated`` entry of a container state (``None`` without one)."""
        term = _mapping(state).get("terminated")
        if not isinstance(term, Mapping):
            return None
        code = term.get("exitCode")
        return cls(
            exit_code=code if isinstance(code, int) and not isinstance(code, bool) else None,
            reason=_text(term.get("reason")),
            message=_text(term.get("message")),
        )


@dataclass(frozen=True)
class ContainerStatus:
    """One entry of a pod's ``initContainerStatuses`` or ``containerStatuses``.

    Attributes:
        name: The container.
        init: Whether it is an init container (or a sidecar).
        restarts: ``restartCount`` (0 without one).
        waiting_reason: The reason it is waiting (``""`` when it is not).
        waiting_message: The kubelet's message about the wait.
        running: Whether its state says it runs.
        ended: Whether its state says it has terminated.
        terminated: How it ended (its current state's ``terminated``).
        last_terminated: How its previous run ended (``lastState.terminated``).
    """

    name: str
    init: bool = False
    restarts: int = 0
    waiting_reason: str = ""
    waiting_message: str = ""
    running: bool = False
    ended: bool = False
    terminated: Termination | None = None
    last_terminated: Termination | None = None

    @property
    def started(self) -> bool:
        """Whether it has a log: it runs or has ended (not waiting to start, or between two
        runs of a crash loop)."""
        return self.running or self.ended

    @property
    def failed(self) -> bool:
        """Whether it exited non-zero."""
        return self.terminated is not None and self.terminated.nonzero

    @classmethod
    def of(cls, status: Mapping[str, Any], *, init: bool = False) -> ContainerStatus:
        """Read one container status."""
        state = _mapping(status.get("state"))
        waiting = _mapping(state.get("waiting"))
        restarts = status.get("restartCount")
        if not isinstance(restarts, int) or isinstance(restarts, bool):
            restarts = 0
        return cls(
            name=_text(status.get("name")),
            init=init,
            restarts=restarts,
            waiting_reason=_text(waiting.get("reason")),
            waiting_message=_text(waiting.get("message")),
            running="running" in state,
            ended="terminated" in state,
            terminated=Termination.of(state),
            last_terminated=Termination.of(status.get("lastState")),
        )


@dataclass(frozen=True)
class PodCondition:
    """One of a pod's ``status.conditions``."""

    type: str
    status: str
    reason: str = ""
    message: str = ""
    #: ``lastTransitionTime`` as the API server wrote it (``None`` without one).
    since: str | None = None

    @classmethod
    def of(cls, condition: Mapping[str, Any]) -> PodCondition:
        """Read one condition."""
        since = condition.get("lastTransitionTime")
        return cls(
            type=_text(condition.get("type")),
            status=_text(condition.get("status")),
            reason=_text(condition.get("reason")),
            message=_text(condition.get("message")),
            since=since if isinstance(since, str) else None,
        )


def _owner_job(meta: Mapping[str, Any]) -> str | None:
    for ref in mappings(meta.get("ownerReferences")):
        if ref.get("kind") == "Job" and ref.get("name"):
            return str(ref["name"])
    return None


def _completion_index(meta: Mapping[str, Any]) -> int | None:
    for key in _COMPLETION_INDEX_KEYS:
        found = _int_field(meta, key)
        if found is not None:
            return found
    return None


@dataclass(frozen=True)
class PodView:
    """What the core reads of a pod, typed: build one with :meth:`of`.

    Attributes:
        raw: The pod as given.
        name, namespace, uid: Its metadata (``""`` when missing).
        labels: Its labels (as text).
        replicated_job: The ``replicatedjob-name`` label.
        job_index: The ``job-index`` label (or annotation).
        completion_index: The Job's completion index (label or annotation).
        restart_attempt: The ``restart-attempt`` label (or annotation).
        created: ``creationTimestamp`` (``""`` when missing).
        deleting: Whether it has a ``deletionTimestamp``.
        phase: ``status.phase`` (``""`` when missing).
        owner_job: The Job that owns it.
        containers: Its containers' names, in spec order.
        statuses: Its container statuses: init containers first, then the others.
        conditions: Its conditions.
    """

    raw: Mapping[str, Any] = field(repr=False, compare=False)
    name: str = ""
    namespace: str = ""
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    replicated_job: str | None = None
    job_index: int | None = None
    completion_index: int | None = None
    restart_attempt: int | None = None
    created: str = ""
    deleting: bool = False
    phase: str = ""
    owner_job: str | None = None
    containers: tuple[str, ...] = ()
    statuses: tuple[ContainerStatus, ...] = ()
    conditions: tuple[PodCondition, ...] = ()

    @classmethod
    def of(cls, pod: Mapping[str, Any]) -> PodView:
        """Read a pod (API-shaped; anything missing or malformed reads as absent)."""
        pod = _mapping(pod)
        meta = metadata(pod)
        status = _mapping(pod.get("status"))
        labels = {str(k): str(v) for k, v in _mapping(meta.get("labels")).items() if v is not None}
        statuses = [
            *(
                ContainerStatus.of(s, init=True)
                for s in mappings(status.get("initContainerStatuses"))
            ),
            *(ContainerStatus.of(s) for s in mappings(status.get("containerStatuses"))),
        ]
        return cls(
            raw=pod,
            name=_text(meta.get("name")),
            namespace=_text(meta.get("namespace")),
            uid=_text(meta.get("uid")),
            labels=labels,
            replicated_job=labels.get(L.REPLICATED_JOB_NAME),
            job_index=_int_field(meta, L.JOB_INDEX),
            completion_index=_completion_index(meta),
            restart_attempt=_int_field(meta, L.RESTART_ATTEMPT),
            created=_text(meta.get("creationTimestamp")),
            deleting=bool(meta.get("deletionTimestamp")),
            phase=_text(status.get("phase")),
            owner_job=_owner_job(meta),
            containers=tuple(
                _text(c.get("name")) for c in mappings(_mapping(pod.get("spec")).get("containers"))
            ),
            statuses=tuple(statuses),
            conditions=tuple(PodCondition.of(c) for c in mappings(status.get("conditions"))),
        )

    @property
    def ident(self) -> str:
        """The pod's UID, else its name."""
        return self.uid or self.name

    @property
    def finished(self) -> bool:
        """Whether its phase is final (``Succeeded`` or ``Failed``)."""
        return self.phase in ("Succeeded", "Failed")

    @property
    def failed(self) -> bool:
        """Whether it failed: phase ``Failed``, or a container that exited non-zero."""
        return self.phase == "Failed" or any(s.failed for s in self.container_statuses)

    @property
    def container_statuses(self) -> tuple[ContainerStatus, ...]:
        """The statuses of its regular containers (``containerStatuses``)."""
        return tuple(s for s in self.statuses if not s.init)

    def status_of(self, container: str) -> ContainerStatus | None:
        """The status of one regular container (``None`` without one)."""
        for status in self.container_statuses:
            if status.name == container:
                return status
        return None

    @functools.cached_property
    def waiting_reasons(self) -> frozenset[str]:
        """The reasons its containers (init ones too) wait for (read once: a view never
        changes)."""
        return frozenset(s.waiting_reason for s in self.statuses if s.waiting_reason)

    @functools.cached_property
    def unschedulable(self) -> PodCondition | None:
        """Its ``PodScheduled=False`` condition of reason ``Unschedulable``, if any."""
        for condition in self.conditions:
            if (
                condition.type == "PodScheduled"
                and condition.status == "False"
                and condition.reason == UNSCHEDULABLE
            ):
                return condition
        return None

    @property
    def newest_first(self) -> tuple[int, str, str]:
        """The sort key that puts the latest restart attempt, then the newest pod, last (a
        retried pod replaces a failed one): ``max(..., key=...)`` picks the current one."""
        return (self.restart_attempt or 0, self.created, self.name)


class PodViews:
    """The views of a run's pods from one look to the next: a pod that is the same object as
    at the last look keeps its view (the observer reads back a big run's unchanged pods as
    the objects it read last time, and never changes one in place). A waiter judges a
    1,000-pod run at every change of one of its pods; reading all of them again each time
    cost ~60 us a pod.

    Only the views of the last look are kept, and only for runs of :data:`VIEWS_KEPT_FROM`
    pods or more: a view holds its pod, and the observer keeps a small run's pods as text
    between looks (a run of a few pods reads them again at its next change, 60 us a pod,
    rather than holding them through a wait of hours).
    """

    def __init__(self) -> None:
        self._known: dict[int, tuple[Mapping[str, Any], PodView]] = {}

    def of(self, pods: Sequence[Mapping[str, Any]]) -> list[PodView]:
        """The views of ``pods``, in their order."""
        if len(pods) < VIEWS_KEPT_FROM:
            self._known = {}
            return [PodView.of(pod) for pod in pods]
        known, kept = self._known, {}
        views: list[PodView] = []
        for pod in pods:
            found = known.get(id(pod))
            view = found[1] if found is not None and found[0] is pod else PodView.of(pod)
            kept[id(pod)] = (pod, view)
            views.append(view)
        self._known = kept
        return views


# ------------------------------------------------------------------------------ choosing


@dataclass(frozen=True)
class PodRef:
    """Which pod of a JobSet to read: replicated job, job index, pod (completion) index."""

    replicated_job: str
    job_index: int = 0
    pod_index: int = 0


def log_pod_target(
    jobset: JobSet | None,
    *,
    replicated_job: str | None = None,
    job_index: int = 0,
    pod_index: int = 0,
) -> PodRef | None:
    """The pod to read: the one asked for; else the coordinator (``spec.coordinator``); else
    pod 0 of job 0 of the first replicated job. ``None`` when nothing names one."""
    if replicated_job:
        return PodRef(replicated_job, job_index, pod_index)
    if jobset is None:
        return None
    coordinator = jobset.spec.coordinator
    if coordinator is not None:
        return PodRef(
            coordinator.replicated_job, coordinator.job_index or 0, coordinator.pod_index or 0
        )
    if jobset.replicated_jobs:
        return PodRef(jobset.replicated_jobs[0].name)
    return None


def choose_log_pod(pods: Iterable[Mapping[str, Any]], target: PodRef) -> Mapping[str, Any] | None:
    """The pod ``target`` names among a JobSet's pods, from its latest restart attempt.

    Pods are matched on the ``replicatedjob-name`` and ``job-index`` labels and the Job's
    completion index; for a Job without completion indexes (NonIndexed), ``pod_index``
    counts the Job's pods ordered by name. Of several matching pods (retries, restarts) the
    newest of the latest attempt wins.
    """
    same_job = [
        view
        for view in map(PodView.of, pods)
        if view.replicated_job == target.replicated_job and view.job_index == target.job_index
    ]
    if not same_job:
        return None
    indexed = [v for v in same_job if v.completion_index is not None]
    if indexed:
        matching = [v for v in indexed if v.completion_index == target.pod_index]
        return max(matching, key=lambda v: v.newest_first).raw if matching else None
    latest = max(v.newest_first[0] for v in same_job)
    current = sorted((v for v in same_job if v.newest_first[0] == latest), key=lambda v: v.name)
    return current[target.pod_index].raw if target.pod_index < len(current) else None


# ------------------------------------------------------------------------------ results


def termination_message(pod: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """The pod's first container (spec order) that left a termination message, and the
    message as the kubelet kept it; ``None`` without one."""
    if pod is None:
        return None
    view = PodView.of(pod)
    messages: dict[str, str] = {}
    for status in view.container_statuses:
        if status.terminated is not None and status.terminated.message:
            messages[status.name] = status.terminated.message
    for name in view.containers or sorted(messages):
        if name in messages:
            return name, messages[name]
    return None


def termination_result(pod: Mapping[str, Any] | None) -> Any:
    """The run's result: the termination message of the pod's first container (spec order)
    that left one, JSON-decoded when it parses; ``None`` without a message."""
    found = termination_message(pod)
    return decode_result(found[1]) if found is not None else None


def failed_pods(pods: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Pods that failed (phase ``Failed``, or a container that exited non-zero), by name."""
    failed = [view for view in map(PodView.of, pods) if view.failed]
    return [view.raw for view in sorted(failed, key=lambda v: v.name)]


def pod_container(pod: Mapping[str, Any]) -> str | None:
    """The container whose log to read: the pod's first container."""
    containers = PodView.of(pod).containers
    return containers[0] if containers else None


def failed_containers(pod: Mapping[str, Any]) -> list[tuple[str, bool]]:
    """The containers of a pod whose log tells why it failed, as ``(container, previous)``:
    one that exited non-zero (its log), one crash-looping after a non-zero exit (its previous
    run's log); for a failed pod without such a container, its first container."""
    view = PodView.of(pod)
    found: list[tuple[str, bool]] = []
    for status in view.container_statuses:
        if status.failed:
            found.append((status.name, False))
        elif (
            status.waiting_reason == CRASH_LOOP
            and status.last_terminated is not None
            and status.last_terminated.nonzero
        ):
            found.append((status.name, True))
    if not found and view.phase == "Failed" and view.containers and view.containers[0]:
        found = [(view.containers[0], False)]
    return found
