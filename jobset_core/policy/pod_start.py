"""Pods that cannot start: which ones, since when, and whether that ends the run (pure).

The JobSet controller never fails a JobSet whose pods cannot start: a wrong image, a missing
Secret or ConfigMap, or a request no node can fit leaves them ``Pending`` forever, and a
container that keeps crashing under ``restartPolicy: OnFailure`` (or a crashing sidecar)
only fails its Job once ``backoffLimit`` is spent, if ever. :func:`check_pod_starts` looks at
the pods of the run's current attempt (as the observer keeps them) and decides, with
:class:`PodStartRules`:

* a container waiting with a start failure (:data:`START_FAILURES`: ``ErrImagePull``,
  ``ImagePullBackOff``, ``InvalidImageName``, ``CreateContainerConfigError``,
  ``CreateContainerError``...) fails the run once that has lasted longer than ``grace``
  (0: at once). ``ContainerCreating`` is never one: a big image that is still being pulled is
  not a failure;
* a pod that the scheduler reports ``PodScheduled=False`` / ``Unschedulable`` fails it after
  ``pending_timeout`` (off by default: a cluster may be scaling up);
* a container in ``CrashLoopBackOff`` that restarted ``crash_loop_restarts`` times or more
  fails it (off by default: the Job's ``backoffLimit`` and the JobSet's failure policy already
  count the restarts of regular containers).

Since when a state lasts is read from the cluster where it says so, so that every waiter
(whatever process, however late it started) reaches the same decision at the same time: the
first ``Warning`` Event the kubelet wrote about the pod's start failure (``firstTimestamp``),
the ``PodScheduled`` condition's ``lastTransitionTime``; those are whole seconds, counted from
the end of their second (a decision may come up to a second late, never early). The first time
this waiter saw the state counts when that is earlier (``seen``, kept by the caller between
checks). The kubelet's and the waiter's clocks are compared, so a large clock skew shifts the
moment.

Nothing here performs I/O or reads a clock: the caller passes ``now``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from jobset_core.pods import CRASH_LOOP, UNSCHEDULABLE, ContainerStatus, PodView
from jobset_core.policy._time import parse_time

__all__ = [
    "CRASH_LOOP",
    "DEFAULT_GRACE",
    "START_EVENT_REASONS",
    "START_FAILURES",
    "UNSCHEDULABLE",
    "PodStartCheck",
    "PodStartRules",
    "SeenKey",
    "StartProblem",
    "check_pod_starts",
    "describe_failure",
    "describe_problem",
]

#: Waiting reasons of a container that cannot start (kubelet v1.36: ``pkg/kubelet/images``,
#: ``kuberuntime_container.go``, ``container/sync_result.go``).
START_FAILURES: frozenset[str] = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "ImageInspectError",
        "ErrImageNeverPull",
        "InvalidImageName",
        "RegistryUnavailable",
        "SignatureValidationFailed",
        "CreateContainerConfigError",
        "CreateContainerError",
        "PreCreateHookError",
        "PreStartHookError",
        "RunContainerError",
    }
)
#: Reasons of the kubelet's ``Warning`` Events about a container that cannot start
#: (``events.FailedToCreateContainer``/``FailedToPullImage`` are ``Failed``,
#: ``FailedToInspectImage`` is ``InspectFailed``, ``ErrImageNeverPullPolicy``).
START_EVENT_REASONS: frozenset[str] = frozenset({"Failed", "InspectFailed", "ErrImageNeverPull"})
#: The default grace period of a start failure (seconds).
DEFAULT_GRACE = 120.0

#: Events of a pod named in a failure message (the newest).
EVENTS_SHOWN = 3
#: Pods named in a failure message beside the first.
OTHERS_SHOWN = 3
_TEXT_LIMIT = 400

Kind = Literal["start", "crash-loop", "unschedulable"]
#: What :attr:`PodStartCheck.seen` is keyed by: pod UID (else name), container, kind.
SeenKey = tuple[str, str, str]


def _seconds(value: float | None, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be a number of seconds or None, not {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{what} must be a finite number of seconds >= 0, not {value!r}")
    return float(value)


@dataclass(frozen=True)
class PodStartRules:
    """When pods that cannot start fail the run.

    Attributes:
        grace: Seconds a container may wait with a start failure (:data:`START_FAILURES`)
            before the run fails; 0: at once; ``None``: never.
        pending_timeout: Seconds a pod may stay unschedulable; ``None`` (default): never.
        crash_loop_restarts: Restarts of a container in ``CrashLoopBackOff`` that fail the
            run; ``None`` (default): never.

    Raises:
        TypeError, ValueError: a value that is not a whole, finite, non-negative number.
    """

    grace: float | None = DEFAULT_GRACE
    pending_timeout: float | None = None
    crash_loop_restarts: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "grace", _seconds(self.grace, "grace"))
        object.__setattr__(
            self, "pending_timeout", _seconds(self.pending_timeout, "pending_timeout")
        )
        restarts = self.crash_loop_restarts
        if restarts is not None and (
            isinstance(restarts, bool) or not isinstance(restarts, int) or restarts < 1
        ):
            raise ValueError(f"crash_loop_restarts must be an int >= 1 or None, not {restarts!r}")

    @property
    def off(self) -> bool:
        """Whether no rule is on."""
        return self.grace is None and self.pending_timeout is None and not self.crash_loop_restarts

    def to_dict(self) -> dict[str, Any]:
        """The JSON-able form (a trigger's arguments)."""
        return {
            "grace": self.grace,
            "pending_timeout": self.pending_timeout,
            "crash_loop_restarts": self.crash_loop_restarts,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> PodStartRules:
        """Rebuild from :meth:`to_dict` (``None``: the defaults)."""
        if data is None:
            return cls()
        return cls(
            grace=data.get("grace"),
            pending_timeout=data.get("pending_timeout"),
            crash_loop_restarts=data.get("crash_loop_restarts"),
        )


@dataclass(frozen=True)
class StartProblem:
    """One pod (and container) that cannot start.

    Attributes:
        kind: ``start`` (a start failure), ``crash-loop`` or ``unschedulable``.
        pod: The pod's name.
        container: The container (``None`` for an unschedulable pod).
        reason: The waiting reason (or ``Unschedulable``).
        message: The kubelet's (or scheduler's) message.
        since: When the state began (epoch seconds).
        limit: How long it may last (seconds).
        restarts: The container's restart count.
        job: The pod's Job.
        events: The pod's newest Warning Events, oldest first (``Reason: message (xN)``).
        last_exit: For a crash loop, how the container last ended.
        threshold: For a crash loop, the restarts that fail the run.
    """

    kind: Kind
    pod: str
    container: str | None
    reason: str
    message: str
    since: float
    limit: float
    restarts: int = 0
    job: str | None = None
    events: tuple[str, ...] = ()
    last_exit: str = ""
    threshold: int = 0

    @property
    def due(self) -> float:
        """When the state fails the run (epoch seconds)."""
        return self.since + self.limit

    @property
    def key(self) -> tuple[str, str | None, str]:
        """Which pod, container and kind of problem (for telling new ones apart)."""
        return (self.pod, self.container, self.kind)


@dataclass(frozen=True)
class PodStartCheck:
    """What the pods of the current attempt say.

    Attributes:
        problems: Every pod that cannot start now, earliest due first.
        failed: The problems past their limit: the run has failed when there is one.
        recheck_at: When a problem falls due without anything changing (epoch seconds).
        seen: When this waiter first saw each current problem (pass it to the next check).
    """

    problems: tuple[StartProblem, ...] = ()
    failed: tuple[StartProblem, ...] = ()
    recheck_at: float | None = None
    seen: Mapping[SeenKey, float] = field(default_factory=dict)


# ------------------------------------------------------------------------------- reading


def _epoch(value: Any) -> float | None:
    parsed = parse_time(value) if isinstance(value, str) else None
    return parsed.timestamp() if parsed is not None else None


def _began(value: Any) -> float | None:
    """When a state began, from a timestamp the cluster wrote: one of whole seconds (a
    ``metav1.Time``) counts from the end of its second, so a grace period is never cut short
    by the truncation."""
    found = _epoch(value)
    if found is None or not isinstance(value, str) or "." in value:
        return found
    return found + 1.0


def _clip(text: str, limit: int = _TEXT_LIMIT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _event_start(event: Mapping[str, Any]) -> float | None:
    return _began(event.get("firstTimestamp")) or _began(event.get("eventTime"))


def _event_end(event: Mapping[str, Any]) -> float:
    for key in ("lastTimestamp", "eventTime", "firstTimestamp"):
        found = _epoch(event.get(key))
        if found is not None:
            return found
    return 0.0


def _event_line(event: Mapping[str, Any]) -> str:
    count = event.get("count")
    times = f" (x{count})" if isinstance(count, int) and count > 1 else ""
    return f"{event.get('reason') or '?'}: {_clip(str(event.get('message') or ''), 300)}{times}"


#: The waiting reasons a container can be kept from starting with.
_WATCHED = START_FAILURES | {CRASH_LOOP}
#: What an Event's ``involvedObject.name`` is keyed by when it is no text: no pod's name.
_NOBODY = object()


class _PodEvents:
    """The Events about each pod, oldest first, indexed once per check: an Event is about a
    pod when both have a UID and they are equal, else when their names are."""

    def __init__(self, events: Iterable[Mapping[str, Any]]) -> None:
        self._by_uid: dict[str, list[tuple[float, int, Mapping[str, Any]]]] = {}
        self._uidless: dict[object, list[tuple[float, int, Mapping[str, Any]]]] = {}
        self._by_name: dict[object, list[tuple[float, int, Mapping[str, Any]]]] = {}
        for i, event in enumerate(events):
            about = event.get("involvedObject")
            if not isinstance(about, Mapping) or about.get("kind") != "Pod":
                continue
            entry = (_event_end(event), i, event)
            uid, name = about.get("uid"), about.get("name")
            named = name if name is None or isinstance(name, str) else _NOBODY
            if not uid:
                self._uidless.setdefault(named, []).append(entry)
            elif isinstance(uid, str):
                self._by_uid.setdefault(uid, []).append(entry)
            self._by_name.setdefault(named, []).append(entry)

    def of(self, pod: PodView) -> list[Any]:
        """The Events about ``pod``, oldest first."""
        if not self._by_name:
            return []
        name = pod.name or None
        if pod.uid:
            found = self._by_uid.get(pod.uid, []) + self._uidless.get(name, [])
        else:
            found = self._by_name.get(name, [])
        return [event for _, _, event in sorted(found, key=lambda e: (e[0], e[1]))]


def _last_exit(container: ContainerStatus) -> str:
    term = container.last_terminated
    if term is None:
        return ""
    words = f"exit code {term.exit_code}"
    if term.reason:
        words += f" ({term.reason})"
    if term.message:
        words += f": {_clip(term.message, 200)}"
    return words


def _current(pod: PodView, attempt: int | None) -> bool:
    if pod.deleting or pod.finished:
        return False
    return attempt is None or pod.restart_attempt is None or pod.restart_attempt == attempt


# ------------------------------------------------------------------------------- deciding


@dataclass
class _Tally:
    """One check's rules and clock, and since when this waiter has seen each problem."""

    rules: PodStartRules
    now: float
    seen: Mapping[SeenKey, float]
    kept: dict[SeenKey, float] = field(default_factory=dict)

    def since(self, key: SeenKey) -> float:
        """When this waiter first saw the problem (now, the first time)."""
        return min(self.kept.setdefault(key, self.seen.get(key, self.now)), self.now)


def _problem(pod: PodView, shown: tuple[str, ...], **fields: Any) -> StartProblem:
    return StartProblem(pod=pod.name, job=pod.owner_job, events=shown, **fields)


def _unschedulable(pod: PodView, tally: _Tally, shown: tuple[str, ...]) -> StartProblem | None:
    condition = pod.unschedulable
    limit = tally.rules.pending_timeout
    if condition is None or limit is None:
        return None
    since = tally.since((pod.ident, "", "unschedulable"))
    began = _began(condition.since)
    return _problem(
        pod,
        shown,
        kind="unschedulable",
        container=None,
        reason=UNSCHEDULABLE,
        message=_clip(condition.message),
        since=min(since, began) if began is not None else since,
        limit=limit,
    )


def _start_began(own_events: list[Any]) -> float | None:
    """When the kubelet first reported the pod's start failure (its ``Warning`` Events)."""
    starts = [
        t
        for e in own_events
        if e.get("reason") in START_EVENT_REASONS and e.get("type") != "Normal"
        for t in [_event_start(e)]
        if t is not None
    ]
    return min(starts) if starts else None


def _container_problem(
    pod: PodView,
    container: ContainerStatus,
    tally: _Tally,
    own_events: list[Any],
    shown: tuple[str, ...],
) -> StartProblem | None:
    rules, reason = tally.rules, container.waiting_reason
    threshold = rules.crash_loop_restarts
    extra: dict[str, Any] = {}
    kind: Kind
    if reason in START_FAILURES and rules.grace is not None:
        kind, limit = "start", rules.grace
    elif reason == CRASH_LOOP and threshold is not None and container.restarts >= threshold:
        kind, limit = "crash-loop", 0.0
        extra = {"last_exit": _last_exit(container), "threshold": threshold}
    else:
        return None
    since = tally.since((pod.ident, container.name, kind))
    began = _start_began(own_events) if kind == "start" else None
    return _problem(
        pod,
        shown,
        kind=kind,
        container=container.name,
        reason=reason,
        message=_clip(container.waiting_message),
        since=min(since, began) if began is not None else since,
        limit=limit,
        restarts=container.restarts,
        **extra,
    )


def check_pod_starts(
    pods: Iterable[Mapping[str, Any] | PodView],
    events: Iterable[Mapping[str, Any]],
    rules: PodStartRules,
    *,
    now: float,
    attempt: int | None = None,
    seen: Mapping[SeenKey, float] | None = None,
) -> PodStartCheck:
    """Which pods of the current attempt cannot start, and whether the run has failed.

    Args:
        pods: The run's pods (API-shaped; the observer's trimmed ones are enough), or their
            views.
        events: The run's Warning Events.
        rules: When a problem fails the run.
        now: The time of the check (epoch seconds).
        attempt: The current restart attempt (``status.restarts``): pods of earlier attempts
            (``restart-attempt`` label) do not count. ``None``: every pod counts.
        seen: When this waiter first saw each problem (from the previous check).
    """
    if rules.off:
        return PodStartCheck()
    about = _PodEvents(events)
    tally = _Tally(rules, now, seen or {})
    problems: list[StartProblem] = []
    for given in pods:
        pod = given if isinstance(given, PodView) else PodView.of(given)
        if pod.unschedulable is None and not pod.waiting_reasons & _WATCHED:
            continue  # nothing that could keep it from starting (most pods, most of the time)
        if not _current(pod, attempt):
            continue
        own_events = about.of(pod)
        shown = tuple(_event_line(e) for e in own_events[-EVENTS_SHOWN:])
        found = [_unschedulable(pod, tally, shown)]
        found += (_container_problem(pod, c, tally, own_events, shown) for c in pod.statuses)
        problems += (p for p in found if p is not None)
    problems.sort(key=lambda p: (p.due, p.pod, p.container or ""))
    failed = tuple(p for p in problems if p.due <= now)
    waiting_on = [p.due for p in problems if p.due > now]
    return PodStartCheck(
        problems=tuple(problems),
        failed=failed,
        recheck_at=min(waiting_on) if waiting_on else None,
        seen=tally.kept,
    )


def _seconds_text(value: float) -> str:
    return f"{round(value):d}s" if value >= 10 else f"{round(value, 1):g}s"


def _what(problem: StartProblem) -> str:
    if problem.container is None:
        return f"pod {problem.pod}"
    return f"pod {problem.pod} container {problem.container}"


def describe_problem(problem: StartProblem, *, now: float) -> str:
    """One problem in words: who, the reason and message, for how long, the last Events."""
    detail = f": {problem.message}" if problem.message else ""
    lasted = _seconds_text(max(0.0, now - problem.since))
    if problem.kind == "crash-loop":
        head = f"{_what(problem)} is crash-looping: {problem.reason}{detail}"
        rule = f"{problem.restarts} restarts, crash_loop_restarts={problem.threshold}"
        tail = f"; last exit: {problem.last_exit}" if problem.last_exit else ""
        text = f"{head} ({rule}){tail}"
    elif problem.kind == "unschedulable":
        limit = _seconds_text(problem.limit)
        text = (
            f"{_what(problem)} cannot be scheduled: {problem.reason}{detail} "
            f"(pending for {lasted}, pending_timeout {limit})"
        )
    else:
        limit = "0s: at once" if problem.limit == 0 else _seconds_text(problem.limit)
        text = (
            f"{_what(problem)} cannot start: {problem.reason}{detail} (for {lasted}, grace {limit})"
        )
    if problem.events:
        text += "; last events: " + " | ".join(problem.events)
    return text


def describe_failure(check: PodStartCheck, *, now: float) -> str:
    """The message of a run that failed because its pods cannot start: the first pod in
    full, how many more, and who they are."""
    if not check.failed:
        return ""
    first, rest = check.failed[0], check.problems
    others = [p for p in rest if p.key != first.key]
    text = describe_problem(first, now=now)
    if others:
        named = ", ".join(f"{p.pod} ({p.reason})" for p in others[:OTHERS_SHOWN])
        more = len(others) - OTHERS_SHOWN
        text += f"; {len(others)} more cannot start: {named}" + (
            f" and {more} more" if more > 0 else ""
        )
    return text
