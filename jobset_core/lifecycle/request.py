"""What a way in asks of the lifecycle: one frozen :class:`RunRequest`.

Every way in (the Airflow operator and sensor, the KFP launcher, ``jobsetctl``) builds one
request from its own arguments, and only there are arguments checked and converted: a
``timedelta``, a KFP ``-1`` meaning "never" or a CLI flag become the request's plain values.
The checks of the arguments the ways share are here, once (:func:`seconds`,
:func:`pod_start_rules`, :func:`log_options`, ...), so the same argument given to two ways
is refused by the same code with the same words (:class:`~jobset_core.errors.InvalidArgument`:
each way puts its own name on the argument).

The run's time limits are one value, :class:`Deadline`, built once from what the user gave
and carried as it is (a deferred task's trigger gets the same value, serialised with the
request by :meth:`RunRequest.to_dict`).

Pure: nothing here performs I/O or reads a clock (the callers pass ``now``).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from jobset_core import identity as ident
from jobset_core.backends import BACKEND_CHOICES, BackendChoice, Handle
from jobset_core.errors import InvalidArgument
from jobset_core.lifecycle._log_plan import LOG_POD_CHOICES, LogOptions, LogTarget, check_selector
from jobset_core.lifecycle.verdict import DELETE_POLICIES, DeletePolicy
from jobset_core.models import JobSet
from jobset_core.naming import dns1123_label_errors, ensure_namespace
from jobset_core.outcome import Phase
from jobset_core.policy.pod_start import DEFAULT_GRACE, PodStartRules
from jobset_core.policy.queue import Queue

__all__ = [
    "ON_PREEMPTION",
    "Clock",
    "Deadline",
    "InvalidArgumentType",
    "Limit",
    "OnPreemption",
    "OnRestart",
    "RunRequest",
    "count",
    "flag",
    "log_options",
    "namespace",
    "one_of",
    "pod_start_rules",
    "queue_name",
    "seconds",
]

OnRestart = Literal["continue", "return"]
#: What a wait does when a queue (Kueue) preempts the run: ``wait`` through the requeue;
#: ``retry``: end the wait (a task's try ends, and the next one reattaches); ``fail``.
OnPreemption = Literal["wait", "retry", "fail"]
ON_PREEMPTION: tuple[OnPreemption, ...] = ("wait", "retry", "fail")


class InvalidArgumentType(InvalidArgument, TypeError):
    """An argument of the wrong type (a ``TypeError`` too, as Python's own are)."""


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def wrong_type(argument: str, expected: str, value: Any) -> InvalidArgumentType:
    """The error for ``value`` that is not what ``argument`` takes."""
    return InvalidArgumentType(
        argument, f"must be {expected}, not {type(value).__name__} {_shown(value)}"
    )


# ------------------------------------------------------------------------------ the checks


def seconds(value: Any, argument: str, *, positive: bool = False) -> float | None:
    """A duration: a ``timedelta`` or a number of seconds, finite and not negative (with
    ``positive``, above 0); ``None`` stays ``None`` (no limit, or never).

    Raises:
        InvalidArgument: naming ``argument``.
    """
    if value is None:
        return None
    if isinstance(value, _dt.timedelta):
        number = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    else:
        raise wrong_type(argument, "a number of seconds, a datetime.timedelta or None", value)
    if not math.isfinite(number) or number < 0 or (positive and number == 0):
        bound = "positive" if positive else "0 or more"
        raise InvalidArgument(argument, f"must be {bound}, not {_shown(value)}")
    return number


def count(value: Any, argument: str, *, minimum: int = 0, optional: bool = False) -> int | None:
    """A whole number ``>= minimum`` (``bool`` is not a number here); with ``optional``,
    ``None`` too.

    Raises:
        InvalidArgument: naming ``argument``.
    """
    if value is None and optional:
        return None
    expected = f"an int >= {minimum}" + (" or None" if optional else "")
    if isinstance(value, bool) or not isinstance(value, int):
        raise wrong_type(argument, expected, value)
    if value < minimum:
        raise InvalidArgument(argument, f"must be >= {minimum}, not {value}")
    return value


def flag(value: Any, argument: str) -> bool:
    """``True`` or ``False``.

    Raises:
        InvalidArgument: naming ``argument``.
    """
    if not isinstance(value, bool):
        raise wrong_type(argument, "True or False", value)
    return value


def one_of(value: Any, argument: str, allowed: Collection[str]) -> str:
    """One of ``allowed``.

    Raises:
        InvalidArgument: naming ``argument``.
    """
    if not isinstance(value, str) or value not in allowed:
        shown = ", ".join(repr(item) for item in allowed)
        raise InvalidArgument(argument, f"must be one of {shown}, not {_shown(value)}")
    return value


def namespace(value: Any, argument: str = "namespace") -> str:
    """A namespace name (a DNS label).

    Raises:
        InvalidArgument: naming ``argument``.
    """
    if not isinstance(value, str):
        raise wrong_type(argument, "a string", value)
    try:
        return ensure_namespace(value, argument)
    except ValueError as err:
        raise InvalidArgument(argument, str(err).removeprefix(f"{argument} ")) from None


def _text(value: Any, argument: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise wrong_type(argument, "a string or None", value)
    return value or None


def pod_start_rules(
    *,
    start_grace: Any = DEFAULT_GRACE,
    pending_timeout: Any = None,
    crash_loop_restarts: Any = None,
) -> PodStartRules:
    """The pod start rules (see :class:`~jobset_core.policy.pod_start.PodStartRules`):
    durations as :func:`seconds` (``None``: never), ``crash_loop_restarts`` ``>= 1`` or
    ``None`` (never).

    Raises:
        InvalidArgument: naming the argument.
    """
    return PodStartRules(
        seconds(start_grace, "start_grace"),
        seconds(pending_timeout, "pending_timeout"),
        count(crash_loop_restarts, "crash_loop_restarts", minimum=1, optional=True),
    )


def log_options(
    *,
    log_pods: Any = "coordinator",
    log_container: Any = None,
    log_max_pods: Any = 8,
    log_max_bytes_per_second: Any = 64 * 1024,
    log_max_bytes: Any = 16 * 1024 * 1024,
    log_replicated_job: Any = None,
    log_job_index: Any = 0,
    log_pod_index: Any = 0,
) -> LogOptions:
    """The log options (see :class:`~jobset_core.lifecycle.LogOptions`); the byte limits
    take ``None`` for no limit.

    Raises:
        InvalidArgument: naming the argument.
    """
    if not isinstance(log_pods, str):
        raise wrong_type("log_pods", "a string", log_pods)
    if log_pods not in LOG_POD_CHOICES:
        try:
            check_selector(log_pods)
        except ValueError as err:
            raise InvalidArgument("log_pods", str(err)) from None
    container = _text(log_container, "log_container")
    if container and dns1123_label_errors(container):
        problem = "; ".join(dns1123_label_errors(container))
        raise InvalidArgument("log_container", f"not a container name: {problem}")
    target = LogTarget(
        _text(log_replicated_job, "log_replicated_job"),
        cast(int, count(log_job_index, "log_job_index")),
        cast(int, count(log_pod_index, "log_pod_index")),
    )
    return LogOptions(
        pods=log_pods,
        container=container,
        target=target,
        max_pods=cast(int, count(log_max_pods, "log_max_pods", minimum=1)),
        max_bytes_per_second=count(
            log_max_bytes_per_second, "log_max_bytes_per_second", minimum=1, optional=True
        ),
        max_bytes=count(log_max_bytes, "log_max_bytes", minimum=1, optional=True),
    )


#: Every ``until`` made so far, one object each: a request and its copies (a trigger makes
#: one), and the requests of a thousand waiting tasks, share it.
_UNTILS: dict[frozenset[Phase], frozenset[Phase]] = {}

#: Why the native backend cannot run through Kueue (Kueue v0.17.0 admits one batch Job per
#: Workload; only its pod integration composes a group, and only of plain pods).
NATIVE_QUEUE = (
    "the native backend cannot run through a Kueue queue: Kueue admits each of its child Jobs "
    "on its own (one Workload per Job), and a JobSet admitted piece by piece can hold quota "
    "while it waits for the rest; use backend='controller' (the JobSet controller and Kueue "
    "admit the whole JobSet as one Workload)"
)


def queue_name(value: Any, argument: str) -> str | None:
    """A Kueue LocalQueue or WorkloadPriorityClass name, as the label value that carries it
    (a DNS label: at most 63 characters); ``None`` or ``""``: none.

    Raises:
        InvalidArgument: naming ``argument``.
    """
    name = _text(value, argument)
    if name and dns1123_label_errors(name):
        raise InvalidArgument(argument, "; ".join(dns1123_label_errors(name)))
    return name


# ------------------------------------------------------------------------------ the values


Clock = Literal["run", "admission", "task"]


@dataclass(frozen=True)
class Limit:
    """When a wait is given up, at one observation.

    Attributes:
        ends_at: Epoch seconds (``None``: never).
        clock: Which limit ends first: ``run`` (``timeout``: the running time),
            ``admission`` (``admission_timeout``: the wait for a queue's admission) or
            ``task`` (``not_after``: the caller's own limit).
        budget: The seconds that limit allows in all (what a timeout's message says).
    """

    ends_at: float | None
    clock: Clock = "run"
    budget: float | None = None


@dataclass(frozen=True)
class Deadline:
    """The run's time limits, as one value: two clocks and the caller's own limit.

    Attributes:
        timeout: Seconds the run may *run*, from this wait's start: when a queue (Kueue)
            holds the run, only while it is admitted (queue time never counts; time admitted
            before an eviction does, an earlier try's does not). ``None``: no limit.
        not_after: Epoch seconds past which the run is given up whatever the clocks say
            (Airflow's ``execution_timeout``, counted from the task's start).
        started: Epoch seconds the run was started (submitted or adopted); set once
            (:meth:`begin`) and carried as it is to whoever waits afterwards.
        admission_timeout: Seconds the run may wait for a queue's admission, counted from
            its submission, and again from each eviction that requeues it (``None``: no
            limit). A run no queue holds is never waiting for admission.
    """

    timeout: float | None = None
    not_after: float | None = None
    started: float | None = None
    admission_timeout: float | None = None

    def __post_init__(self) -> None:
        seconds(self.timeout, "timeout", positive=True)
        seconds(self.admission_timeout, "admission_timeout", positive=True)
        for what in ("not_after", "started"):
            value = getattr(self, what)
            if value is not None and (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
            ):
                raise wrong_type(what, "epoch seconds or None", value)

    @property
    def limited(self) -> bool:
        """Whether the run has any time limit."""
        return any(v is not None for v in (self.timeout, self.not_after, self.admission_timeout))

    def begin(self, now: float) -> Deadline:
        """The deadline of a run started at ``now`` (kept when it had started already)."""
        return self if self.started is not None else dataclasses.replace(self, started=now)

    def limit(self, queue: Queue | None, now: float, *, ran_before: float = 0.0) -> Limit:
        """When the wait is given up, as the run stands at ``now``; after :meth:`begin`.

        Args:
            queue: What Kueue says of the run (``None``: no queue holds it).
            now: Epoch seconds.
            ran_before: Of the queue's ``past_running``, the seconds the run was admitted
                before this wait began (an earlier try's): not this wait's running time.
        """
        limits: list[Limit] = []
        begun = self.started if self.started is not None else now
        if self.not_after is not None:
            limits.append(Limit(self.not_after, "task", max(0.0, self.not_after - begun)))
        if queue is None:
            if self.timeout is not None:
                limits.append(Limit(begun + self.timeout, "run", self.timeout))
        elif queue.status == "admitted":
            if self.timeout is not None:
                since = max(begun, queue.since if queue.since is not None else begun)
                ran = max(0.0, queue.past_running - ran_before) + max(0.0, now - since)
                limits.append(Limit(now + self.timeout - ran, "run", self.timeout))
        elif queue.status == "queued" and self.admission_timeout is not None:
            since = max(begun, queue.since) if queue.since is not None else begun
            ends = since + self.admission_timeout
            limits.append(Limit(ends, "admission", self.admission_timeout))
        if not limits:
            return Limit(None)
        return min(limits, key=lambda limit: limit.ends_at or math.inf)

    def latest_end(self) -> float | None:
        """The latest the wait can last whatever a queue does (``None``: unbounded): a
        safety net for an outer timer (a deferred task's trigger timeout); after
        :meth:`begin`. A queue's admission may come at any time, so only ``not_after``
        bounds a run that may queue; a run without a queue is bounded by ``timeout`` too."""
        return self.not_after

    def ends_at(self) -> float | None:
        """Epoch seconds when a run that no queue holds is given up (``None``: never); after
        :meth:`begin`."""
        if self.started is None:
            return self.not_after
        return self.limit(None, self.started).ends_at

    def budget(self) -> float | None:
        """The seconds a run that no queue holds was given in all; after :meth:`begin`."""
        if self.started is None:
            return self.timeout
        return self.limit(None, self.started).budget

    def to_dict(self) -> dict[str, Any]:
        """The JSON-able form."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Deadline:
        """Rebuild from :meth:`to_dict`."""
        data = data or {}
        return cls(
            data.get("timeout"),
            data.get("not_after"),
            data.get("started"),
            data.get("admission_timeout"),
        )


@dataclass(frozen=True)
class RunRequest:
    """One run, as a way in asks for it.

    Attributes:
        jobset: The JobSet as the caller named it (``None``: only waiting for an existing
            run, as a sensor or a trigger does). The lifecycle prepares it once: identity
            labels, the workload's variables (``inject_env``), validation.
        source: Where the JobSet was read from (a file), named in the errors about it.
        namespace: Where it runs.
        identity: The caller's identity of the run (labels; a name is derived from it when
            the JobSet has none): a retried or resumed caller adopts the run instead of
            creating another.
        backend: ``auto``, ``controller`` or ``native``.
        deadline: The time limits.
        on_restart: ``return``: the wait ends when the run restarts (a task retry);
            ``continue``: it waits through restarts.
        until: Phases that also end the wait (sensors).
        pod_start: When pods that cannot start fail the run.
        delete_policy: What happens to the run once its wait ended.
        cancel_on_kill: Delete the run when the caller is killed (cancelled).
        logs: Follow these pods' logs while waiting (``None``: do not).
        failed_pod_log_lines: Lines of each failed pod's log to keep (0: none).
        inject_env: Give every container the workload's variables.
        adopt_uid: The UID an earlier try created the run with (only that one is adopted).
        replace: A finished run of an earlier try, deleted (and waited for) before this one
            is created.
        wait_gone: After a delete, wait until nothing of the run is left (so a retry never
            meets it being deleted).
        queue: The Kueue LocalQueue to run through (the JobSet's label
            ``kueue.x-k8s.io/queue-name``; it is created suspended, as Kueue expects, and
            runs once admitted). Controller backend only.
        priority_class: The Kueue WorkloadPriorityClass of its Workload.
        on_preemption: What the wait does when Kueue preempts (evicts) the run:
            ``wait``, ``retry`` or ``fail`` (see :data:`OnPreemption`).
    """

    jobset: JobSet | None = None
    source: str | None = None
    namespace: str = "default"
    identity: Mapping[str, str] = field(default_factory=dict)
    backend: BackendChoice = "auto"
    deadline: Deadline = field(default_factory=Deadline)
    on_restart: OnRestart = "continue"
    until: frozenset[Phase] = frozenset()
    pod_start: PodStartRules = field(default_factory=PodStartRules)
    delete_policy: DeletePolicy = "never"
    cancel_on_kill: bool = True
    logs: LogOptions | None = None
    failed_pod_log_lines: int = 50
    inject_env: bool = True
    adopt_uid: str | None = None
    replace: Handle | None = None
    wait_gone: bool = False
    queue: str | None = None
    priority_class: str | None = None
    on_preemption: OnPreemption = "wait"

    def __post_init__(self) -> None:
        namespace(self.namespace)
        one_of(self.backend, "backend", BACKEND_CHOICES)
        one_of(self.on_preemption, "on_preemption", ON_PREEMPTION)
        object.__setattr__(self, "queue", queue_name(self.queue, "queue"))
        object.__setattr__(
            self, "priority_class", queue_name(self.priority_class, "priority_class")
        )
        if self.queue and self.backend == "native":
            raise InvalidArgument("queue", NATIVE_QUEUE)
        one_of(self.on_restart, "on_restart", ("continue", "return"))
        one_of(self.delete_policy, "delete_policy", DELETE_POLICIES)
        for what in ("cancel_on_kill", "inject_env", "wait_gone"):
            flag(getattr(self, what), what)
        count(self.failed_pod_log_lines, "failed_pod_log_lines")
        object.__setattr__(self, "identity", dict(self.identity))
        until = frozenset(Phase(p) for p in self.until)
        object.__setattr__(self, "until", _UNTILS.setdefault(until, until))

    @property
    def run_name(self) -> str:
        """The name the run gets: ``metadata.name``, else derived from the identity
        (``""`` without a JobSet).

        Raises:
            SpecError: neither a name nor an identity to derive one from.
        """
        if self.jobset is None:
            return ""
        return ident.resolve_name(self.jobset, self.identity)

    def but(self, **changes: Any) -> RunRequest:
        """A copy with ``changes``."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-able form of what a waiter needs (a trigger's one argument): everything
        but the JobSet, which a waiter reads from the cluster."""
        replace = self.replace
        return {
            "namespace": self.namespace,
            "identity": dict(self.identity),
            "backend": self.backend,
            "deadline": self.deadline.to_dict(),
            "on_restart": self.on_restart,
            "until": sorted(p.value for p in self.until),
            "pod_start": self.pod_start.to_dict(),
            "delete_policy": self.delete_policy,
            "cancel_on_kill": self.cancel_on_kill,
            "logs": None if self.logs is None else self.logs.to_dict(),
            "failed_pod_log_lines": self.failed_pod_log_lines,
            "inject_env": self.inject_env,
            "adopt_uid": self.adopt_uid,
            "replace": None if replace is None else dataclasses.asdict(replace),
            "wait_gone": self.wait_gone,
            "queue": self.queue,
            "priority_class": self.priority_class,
            "on_preemption": self.on_preemption,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunRequest:
        """Rebuild from :meth:`to_dict` (without a JobSet)."""
        logs, replace = data.get("logs"), data.get("replace")
        return cls(
            namespace=data["namespace"],
            identity=data.get("identity") or {},
            backend=data.get("backend", "auto"),
            deadline=Deadline.from_dict(data.get("deadline")),
            on_restart=data.get("on_restart", "continue"),
            until=frozenset(Phase(p) for p in data.get("until") or ()),
            pod_start=PodStartRules.from_dict(data.get("pod_start")),
            delete_policy=data.get("delete_policy", "never"),
            cancel_on_kill=data.get("cancel_on_kill", True),
            logs=None if logs is None else LogOptions.from_dict(logs),
            failed_pod_log_lines=data.get("failed_pod_log_lines", 50),
            inject_env=data.get("inject_env", True),
            adopt_uid=data.get("adopt_uid"),
            replace=None if replace is None else Handle(**replace),
            wait_gone=data.get("wait_gone", False),
            queue=data.get("queue"),
            priority_class=data.get("priority_class"),
            on_preemption=data.get("on_preemption", "wait"),
        )
