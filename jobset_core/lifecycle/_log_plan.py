"""What a log follower follows, how much it may show, and where it stopped (pure).

:class:`LogOptions` is the one set of log options every way in takes (the operator in worker
and deferrable mode, the KFP step, ``jobsetctl run --follow-logs``): which pods
(``coordinator``, ``leaders``, ``all`` or a label selector), which containers, and the bounds
(pods followed, bytes per second, bytes in all). :func:`select_streams` turns the observer's
pods into the container logs to follow now; :class:`LogBudget` enforces the bounds;
:class:`LogCursor` remembers how far each log was read, so that a follower that starts again
(a restarted triggerer, a dropped stream) continues without repeating a line.

Nothing here performs I/O or reads a clock.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from jobset_core import pods as podread
from jobset_core.models import JobSet
from jobset_core.pods import PodView

__all__ = [
    "LOG_POD_CHOICES",
    "MAX_LINE_BYTES",
    "LogBudget",
    "LogCursor",
    "LogLine",
    "LogOptions",
    "LogTarget",
    "Selection",
    "StreamRef",
    "check_selector",
    "fingerprint",
    "select_streams",
]

#: The keywords of :attr:`LogOptions.pods` (anything else is a label selector).
LOG_POD_CHOICES: tuple[str, ...] = ("coordinator", "leaders", "all")
#: A longer line is cut as it is read, saying how much was left out: a progress bar without
#: newlines is one line, and never holds more than this in memory.
MAX_LINE_BYTES = 16 * 1024
#: How often a follower says how much it left out above the rate (seconds).
DROP_NOTE_EVERY = 10.0
#: Streams a cursor remembers at most (the newest).
CURSOR_STREAMS = 256
_SELECTOR_TERM = re.compile(
    r"^\s*!?[A-Za-z0-9][-A-Za-z0-9_./]*"
    r"(\s*(=|==|!=)\s*[-A-Za-z0-9_.]*|\s+(in|notin)\s+\([-A-Za-z0-9_., ]*\))?\s*$"
)
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True)
class LogTarget:
    """One pod: ``replicated_job`` (default: the coordinator, else the first replicated job),
    its Job index and pod (completion) index."""

    replicated_job: str | None = None
    job_index: int = 0
    pod_index: int = 0


@dataclass(frozen=True)
class LogLine:
    """One line of a pod's log, or a notice about the logs (``notice``: the follower's words,
    such as the line saying the output was truncated).

    Attributes:
        pod: The pod.
        container: The container.
        text: The line (without its newline).
        several: Whether the pod has several containers followed (the prefix names it).
        notice: Whether this is the follower's own line.
    """

    pod: str
    container: str | None
    text: str
    several: bool = False
    notice: bool = False

    def shown(self) -> str:
        """The line as every way in prints it: ``[pod] text``, ``[pod/container] text``."""
        if self.notice or not self.pod:
            return self.text
        who = f"{self.pod}/{self.container}" if self.several and self.container else self.pod
        return f"[{who}] {self.text}"


def _positive(value: int | None, what: str, *, optional: bool) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        allowed = "an int >= 1" + (" or None" if optional else "")
        raise ValueError(f"{what} must be {allowed}, not {value!r}")


def check_selector(text: str) -> str:
    """A label selector as the API server takes it (``key=value``, ``key in (a,b)``,
    ``!key``...), checked for its shape.

    Raises:
        ValueError: it is not one.
    """
    terms = re.split(r",(?![^()]*\))", text)
    # A bare word is a typo of a keyword ("leader") far more often than an existence test:
    # it needs a prefix ("example.com/canary") or an operator to count as a selector.
    bare = all(re.fullmatch(r"\s*[A-Za-z0-9][-A-Za-z0-9_.]*\s*", term) for term in terms)
    if not text.strip() or bare or not all(_SELECTOR_TERM.match(term) for term in terms):
        raise ValueError(
            f"log pods {text!r} is neither one of {', '.join(LOG_POD_CHOICES)} nor a label "
            "selector (such as 'jobset.sigs.k8s.io/replicatedjob-name=workers')"
        )
    return text.strip()


@dataclass(frozen=True)
class LogOptions:
    """Which logs a waiter follows, and how much of them it shows.

    Attributes:
        pods: ``coordinator`` (default: the coordinator pod, else pod 0 of job 0 of the first
            replicated job, or the pod ``target`` names), ``leaders`` (pod 0 of job 0 of each
            replicated job), ``all``, or a label selector (the run's pods matching it).
        container: Follow only this container (default: every container of a pod).
        target: Which pod ``coordinator`` means instead.
        max_pods: Pods followed at most (the first, in replicated-job, Job and pod order).
        max_bytes_per_second: Bytes shown per second, in all (``None``: no limit); lines above
            it are left out, and a line says how many.
        max_bytes: Bytes shown in all (``None``: no limit); then a line says the output was
            truncated and following stops.
        resume: Keep how far each log was read on the run itself, so that a follower of the
            same wait that starts again (a restarted triggerer) continues where it stopped.

    Raises:
        ValueError: a value out of range, or ``pods`` that is no keyword and no selector.
    """

    pods: str = "coordinator"
    container: str | None = None
    target: LogTarget | None = None
    max_pods: int = 8
    max_bytes_per_second: int | None = 64 * 1024
    max_bytes: int | None = 16 * 1024 * 1024
    resume: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.pods, str):
            raise ValueError(f"log pods must be a string, not {self.pods!r}")
        if self.pods not in LOG_POD_CHOICES:
            check_selector(self.pods)
        if self.container is not None and not (
            isinstance(self.container, str) and _NAME.match(self.container)
        ):
            raise ValueError(f"log container must be a container name, not {self.container!r}")
        _positive(self.max_pods, "max log pods", optional=False)
        _positive(self.max_bytes_per_second, "max log bytes per second", optional=True)
        _positive(self.max_bytes, "max log bytes", optional=True)

    @property
    def selector(self) -> str | None:
        """The label selector, when ``pods`` is one."""
        return None if self.pods in LOG_POD_CHOICES else self.pods.strip()

    def to_dict(self) -> dict[str, Any]:
        """The JSON-able form (a trigger's arguments)."""
        target = self.target
        return {
            "pods": self.pods,
            "container": self.container,
            "target": None if target is None else [target.replicated_job, target.job_index,
                                                   target.pod_index],
            "max_pods": self.max_pods,
            "max_bytes_per_second": self.max_bytes_per_second,
            "max_bytes": self.max_bytes,
            "resume": self.resume,
        }  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LogOptions:
        """Rebuild from :meth:`to_dict`."""
        target = data.get("target")
        return cls(
            pods=data.get("pods", "coordinator"),
            container=data.get("container"),
            target=None if target is None else LogTarget(*target),
            max_pods=data.get("max_pods", 8),
            max_bytes_per_second=data.get("max_bytes_per_second"),
            max_bytes=data.get("max_bytes"),
            resume=bool(data.get("resume", False)),
        )


# ------------------------------------------------------------------------------ selection


@dataclass(frozen=True)
class StreamRef:
    """One container log to follow.

    Attributes:
        pod: The pod's name.
        uid: The pod's UID.
        container: The container.
        restart: The container's restart count (a restarted container has a new log).
        several: Whether more than one container of the pod is followed.
        running: Whether the container runs (else it has ended: its log is complete).
    """

    pod: str
    uid: str
    container: str
    restart: int
    several: bool
    running: bool

    @property
    def key(self) -> str:
        """The log's identity: pod UID, container, restart."""
        return f"{self.uid}/{self.container}/{self.restart}"


@dataclass(frozen=True)
class Selection:
    """The container logs to follow now, how many pods the bound left out, and how many
    containers of the kept pods have not started (their logs cannot be read yet)."""

    streams: tuple[StreamRef, ...] = ()
    pods: int = 0
    left_out: int = 0
    unstarted: int = 0


def _order(jobset: JobSet | None) -> dict[str, int]:
    names = [r.name for r in jobset.replicated_jobs] if jobset is not None else []
    return {name: i for i, name in enumerate(names)}


def _sort_key(order: Mapping[str, int]) -> Any:
    def key(view: PodView) -> tuple[int, str, int, int, str]:
        rjob = view.replicated_job or ""
        return (
            order.get(rjob, len(order)),
            rjob,
            view.job_index or 0,
            view.completion_index or 0,
            view.name,
        )

    return key


def _wanted_pods(
    pods: Sequence[Mapping[str, Any]],
    jobset: JobSet | None,
    options: LogOptions,
    matching: Iterable[str] | None,
) -> list[PodView]:
    current = [v for v in map(PodView.of, pods) if not v.deleting]
    latest = max((v.restart_attempt or 0 for v in current), default=0)
    current = [v for v in current if (v.restart_attempt or 0) == latest]
    if options.pods == "coordinator":
        target = options.target or LogTarget()
        ref = podread.log_pod_target(
            None if target.replicated_job else jobset,
            replicated_job=target.replicated_job,
            job_index=target.job_index,
            pod_index=target.pod_index,
        )
        refs = [ref] if ref is not None else []
    elif options.pods == "leaders":
        names = [r.name for r in jobset.replicated_jobs] if jobset is not None else []
        refs = [podread.PodRef(name) for name in names]
    else:
        allowed = None if options.pods == "all" else set(matching or ())
        chosen = [v for v in current if allowed is None or v.name in allowed]
        return sorted(chosen, key=_sort_key(_order(jobset)))
    raw = [v.raw for v in current]
    found = (podread.choose_log_pod(raw, ref) for ref in refs)
    return [PodView.of(pod) for pod in found if pod is not None]


def select_streams(
    pods: Sequence[Mapping[str, Any]],
    jobset: JobSet | None,
    options: LogOptions,
    matching: Iterable[str] | None = None,
) -> Selection:
    """The container logs to follow: of the wanted pods of the latest restart attempt (at
    most ``max_pods``), every container (or the one asked for) that has started.

    Args:
        pods: The run's pods (as the observer keeps them).
        jobset: The run's JobSet (its coordinator and replicated jobs' order).
        options: What to follow.
        matching: For a label selector, the names of the run's pods that match it.
    """
    wanted = _wanted_pods(pods, jobset, options, matching)
    kept = wanted[: options.max_pods]
    streams: list[StreamRef] = []
    unstarted = 0
    for view in kept:
        names = list(view.containers) or sorted(s.name for s in view.container_statuses)
        if options.container is not None:
            names = [n for n in names if n == options.container]
        several = len(names) > 1
        for name in names:
            status = view.status_of(name)
            if status is None or not status.started:
                unstarted += 1  # not started (or between two runs of a crash loop)
                continue
            streams.append(
                StreamRef(
                    pod=view.name,
                    uid=view.ident,
                    container=name,
                    restart=status.restarts,
                    several=several,
                    running=status.running,
                )
            )
    return Selection(tuple(streams), len(kept), max(0, len(wanted) - len(kept)), unstarted)


# ------------------------------------------------------------------------------ the bounds


def _size(value: float) -> str:
    for unit, scale in (("MiB", 1024.0**2), ("KiB", 1024.0)):
        if value >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{int(value)} bytes"


@dataclass
class LogBudget:
    """The bounds of one follower: a rate (a bucket of one second's bytes) and a total.

    Attributes:
        rate: Bytes per second (``None``: no limit).
        total: Bytes in all (``None``: no limit).
        spent: Bytes shown so far (a follower that continues starts from its cursor's).
    """

    rate: int | None
    total: int | None
    spent: int = 0
    _tokens: float = field(default=0.0, repr=False)
    _at: float | None = field(default=None, repr=False)
    _dropped_lines: int = field(default=0, repr=False)
    _dropped_bytes: int = field(default=0, repr=False)
    _noted_at: float | None = field(default=None, repr=False)

    @property
    def exhausted(self) -> bool:
        """Whether the total is spent."""
        return self.total is not None and self.spent >= self.total

    def take(self, size: int, now: float) -> Literal["show", "drop", "over"]:
        """Whether a line of ``size`` bytes is shown, left out (above the rate) or over the
        total (the follower says so and stops)."""
        if self.total is not None and self.spent + size > self.total:
            self.spent = self.total
            return "over"
        if self.rate is not None:
            if self._at is None:
                self._tokens = float(self.rate)
            else:
                self._tokens = min(float(self.rate), self._tokens + (now - self._at) * self.rate)
            self._at = now
            if size > self._tokens:
                self._dropped_lines += 1
                self._dropped_bytes += size
                return "drop"
            self._tokens -= size
        self.spent += size
        return "show"

    def drop_note(self, now: float, *, force: bool = False) -> str | None:
        """What was left out above the rate since the last note (at most one note every
        :data:`DROP_NOTE_EVERY` seconds; ``force``: now)."""
        if not self._dropped_lines:
            return None
        if not force and self._noted_at is not None and now - self._noted_at < DROP_NOTE_EVERY:
            return None
        if self._noted_at is None and not force:
            self._noted_at = now  # the first drop: note it after a while, with what follows
            return None
        lines, size = self._dropped_lines, self._dropped_bytes
        self._dropped_lines = self._dropped_bytes = 0
        self._noted_at = now
        assert self.rate is not None
        return (
            f"<logs: {lines} lines ({_size(size)}) left out: more than {_size(self.rate)}/s "
            "(the log rate limit)>"
        )

    def over_note(self) -> str:
        """The line that says the output was truncated."""
        assert self.total is not None
        return (
            f"<logs truncated: {_size(self.total)} shown (the log size limit); the rest is in "
            "the pods' logs>"
        )


# ------------------------------------------------------------------------------ the cursor


def fingerprint(text: str) -> str:
    """A short fingerprint of a line (a check that a log read again is the same log)."""
    return f"{zlib.crc32(text.encode('utf-8', 'replace')) & 0xFFFFFFFF:08x}"


@dataclass
class LogCursor:
    """How far each followed log was read: lines and the last line's fingerprint, by
    :attr:`StreamRef.key`, and the bytes shown in all.

    A follower that reads a log again skips the lines the cursor counts; when the line it
    stopped at is not the same (the kubelet rotated the log file meanwhile), it says so.
    """

    streams: dict[str, tuple[int, str]] = field(default_factory=dict)
    spent: int = 0

    def read(self, key: str) -> tuple[int, str]:
        """Lines read of one log, and the fingerprint of the last."""
        return self.streams.get(key, (0, ""))

    def advance(self, key: str, count: int, line: str) -> None:
        """One more line of a log was read."""
        self.streams.pop(key, None)
        self.streams[key] = (count, fingerprint(line))
        while len(self.streams) > CURSOR_STREAMS:
            self.streams.pop(next(iter(self.streams)))

    def to_text(self) -> str:
        """The cursor as compact JSON (an annotation's value)."""
        return json.dumps(
            {"v": 1, "spent": self.spent, "streams": {k: list(v) for k, v in self.streams.items()}},
            separators=(",", ":"),
            sort_keys=True,
        )

    @classmethod
    def from_text(cls, text: str | None) -> LogCursor:
        """A cursor from :meth:`to_text` (an empty one for nothing or anything unreadable)."""
        try:
            data = json.loads(text or "")
        except ValueError:
            return cls()
        if not isinstance(data, Mapping) or data.get("v") != 1:
            return cls()
        streams: dict[str, tuple[int, str]] = {}
        for key, value in (data.get("streams") or {}).items():
            if (
                isinstance(value, list)
                and len(value) == 2
                and isinstance(value[0], int)
                and isinstance(value[1], str)
            ):
                streams[str(key)] = (value[0], value[1])
        spent = data.get("spent")
        ok = isinstance(spent, int) and not isinstance(spent, bool) and spent >= 0
        return cls(streams, spent if isinstance(spent, int) and ok else 0)
