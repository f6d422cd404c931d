"""A phase of waiting fleets, as the scale and queue families measure them.

Subject processes (:mod:`benchmarks.fleet`), each a triggerer's event loop holding one trigger
per waiting task, start one after the other (each once the one before runs and has settled:
a start-up figure is the fleet's own); for ``window`` seconds they all just wait,
and what that costs each of them is measured: API requests (audit log, or the subject's own
count without one), watches open, TCP connections, RSS and CPU (from ``/proc``, outside the
process) and event-loop lag (a ticker in the loop). What a family does after the window (end
a burst of runs, free a queue's quota) and times is its own.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks import audit as A
from benchmarks.context import Context
from benchmarks.costs import Hourly, hourly
from benchmarks.proc import Sample, Subject

__all__ = ["Fleets", "Measured", "client_counts", "cost", "start", "watches_per_ns"]


def production_windows() -> dict[str, float]:
    """How long our observer keeps each watch open in production (from the code)."""
    from jobset_core.observe import _observer

    return {"events": float(_observer.EVENT_WATCH_WINDOW), "*": float(_observer.WATCH_WINDOW)}


@dataclass
class Measured:
    """What one subject cost in one phase."""

    name: str
    kind: str
    tasks: int
    ready_took: float = 0.0
    ready_timed_out: bool | None = None
    start_requests: float | None = None
    hourly: Hourly | None = None
    watches: dict[str, int] = field(default_factory=dict)
    watches_per_ns_kind: int = 0
    connections_max: int = 0
    connections_opened_per_hour: float = 0.0
    rss_kib_per_task: float | None = None
    cpu_ms_per_task_hour: float | None = None
    lag_p99: float | None = None
    informers: dict[str, int] = field(default_factory=dict)
    detection_ms: list[float] = field(default_factory=list)
    fired: int = 0
    errors: list[str] = field(default_factory=list)
    counted_at: str = "server"


@dataclass
class Fleets:
    """The subject processes of one phase and the steady window they waited through.

    Attributes:
        label: The phase's name (its subjects are named ``<label>-<subject>``).
        subjects: (subject, fleet kind) pairs.
        tasks: How many tasks each subject holds.
        procs: The processes, by subject.
        t1: The steady window's start.
        t2: Its end.
        baseline: Each process's sample before its triggers started.
        ready: Each subject's ``ready`` message.
        started: Each subject's start: when it was told to go, when it had settled (its
            triggers all running, then the settling time alone), and its own sample then.
        first: Each subject's own sample at ``t1``.
        second: ... and at ``t2``.
        opening: Each process looked at from outside at ``t1``.
        closing: ... and at ``t2``.
    """

    label: str
    subjects: tuple[tuple[str, str], ...]
    tasks: int
    procs: dict[str, Subject]
    t1: float = 0.0
    t2: float = 0.0
    baseline: dict[str, Sample | None] = field(default_factory=dict)
    ready: dict[str, dict[str, Any]] = field(default_factory=dict)
    started: dict[str, tuple[float, float, dict[str, Any]]] = field(default_factory=dict)
    first: dict[str, dict[str, Any]] = field(default_factory=dict)
    second: dict[str, dict[str, Any]] = field(default_factory=dict)
    opening: dict[str, Sample | None] = field(default_factory=dict)
    closing: dict[str, Sample | None] = field(default_factory=dict)

    def stop(self) -> dict[str, dict[str, Any] | None]:
        """Stop every subject; their last messages."""
        return {name: proc.stop() for name, proc in self.procs.items()}


def start(
    ctx: Context,
    label: str,
    subjects: tuple[tuple[str, str], ...],
    tasks: Sequence[Mapping[str, Any]],
    **spec: Any,
) -> Fleets:
    """Start the subjects one after the other (each holding every task), each once every
    trigger of the one before runs and it has settled, then wait through the steady window
    (see the module docs).

    Args:
        ctx: The run.
        label: The phase's name.
        subjects: (subject, fleet kind) pairs; each talks as ``ctx.identities[subject]``.
        tasks: The fleet's tasks (:mod:`benchmarks.fleet`); each gets the identity's
            connection extras.
        spec: More of each fleet's spec (``said``, ``unwatchable``, ...).
    """
    profile = ctx.profile
    ctx.mark_audit()
    procs: dict[str, Subject] = {}
    for name, kind in subjects:
        identity = ctx.identities[name]
        extras = {"kube_config_path": str(identity.kubeconfig)}
        body = {
            "kind": kind,
            "tasks": [{**t, "extras": extras} for t in tasks],
            "watch_window": profile.watch_window if kind in ("ours", "sensor") else None,
            **spec,
        }
        procs[name] = ctx.subject(f"{label}-{name}", "benchmarks.fleet", body, identity)
    fleets = Fleets(label, subjects, len(tasks), procs)
    for name, proc in procs.items():
        proc.wait_for("baseline", 300)
        fleets.baseline[name] = ctx.sampler.look(proc)
    ctx.sampler.add(procs.values())
    settle = min(10.0, profile.window / 4)
    for name, proc in procs.items():
        # One fleet starts at a time, each once the one before has settled: its start-up
        # figures (time, requests) are then its own, not a count of the fleets sharing the
        # CPUs with it (a phase of ours has three, the anchors' has two).
        went = time.time()
        proc.send(cmd="go")
        fleets.ready[name] = proc.wait_for("ready", 900)[0]
        time.sleep(settle)
        fleets.started[name] = (went, time.time(), proc.ask("sample", "sample"))
    fleets.first = {name: proc.ask("sample", "sample") for name, proc in procs.items()}
    fleets.t1 = time.time()
    # The window's ends, looked at on the spot: the sampler's once-a-second samples may leave
    # a short window with one sample, or none, under load.
    fleets.opening = {name: ctx.sampler.look(proc) for name, proc in procs.items()}
    time.sleep(profile.window)
    fleets.closing = {name: ctx.sampler.look(proc) for name, proc in procs.items()}
    fleets.t2 = time.time()
    fleets.second = {name: proc.ask("sample", "sample") for name, proc in procs.items()}
    return fleets


def client_counts(before: Mapping[str, Any], after: Mapping[str, Any]) -> Counter[tuple[str, str]]:
    """The subject's own counts between two samples, as (verb, resource) with resource
    unknown (``*``)."""
    counts: Counter[tuple[str, str]] = Counter()
    for method, n in (after.get("requests") or {}).items():
        delta = n - (before.get("requests") or {}).get(method, 0)
        if delta:
            counts[("watch" if method == "watch" else method.lower(), "*")] += delta
    return counts


def cost(
    ctx: Context,
    fleets: Fleets,
    entries: list[A.Entry],
    name: str,
    kind: str,
    bye: Mapping[str, Any] | None,
) -> Measured:
    """What subject ``name`` (a fleet of ``kind``) cost through the phase (see the docs)."""
    t1, t2, tasks = fleets.t1, fleets.t2, fleets.tasks
    user = ctx.identities[name].user
    ready = fleets.ready[name]
    m = Measured(name, kind, tasks, ready_took=float(ready["took"]))
    m.ready_timed_out = ready.get("timed_out")
    m.errors = list((bye or {}).get("errors", []))
    m.informers = dict((fleets.second[name].get("observer") or {}).get("informers") or {})
    windows = production_windows() if kind in ("ours", "sensor") else None
    if ctx.audited:
        went, settled, _ = fleets.started[name]
        start_counts = A.requests_of(entries, user, went, settled)
        steady = A.requests_of(entries, user, t1, t2)
        streams = A.open_watches(entries, user, (t1 + t2) / 2)
        per_ns = watches_per_ns(entries, user, (t1 + t2) / 2)
        m.watches = dict(streams)
        m.watches_per_ns_kind = max(per_ns.values(), default=0)
        m.start_requests = sum(start_counts.values()) / tasks
    else:
        m.counted_at = "client"
        steady = client_counts(fleets.first[name], fleets.second[name])
        streams = Counter({f"{k}s": v for k, v in m.informers.items()})
        m.watches = dict(streams)
        m.start_requests = float(fleets.started[name][2].get("requests_total", 0)) / tasks
    m.hourly = hourly(steady, t2 - t1, streams, windows)
    inside = ctx.sampler.between(f"{fleets.label}-{name}", t1, t2)
    samples = [s for s in (fleets.opening[name], *inside, fleets.closing[name]) if s is not None]
    if samples:
        m.connections_max = max(s.connections for s in samples)
        base = fleets.baseline[name]
        if base is not None:
            m.rss_kib_per_task = (samples[-1].rss - base.rss) / 1024 / tasks
        cpu = samples[-1].cpu - samples[0].cpu
        span = samples[-1].t - samples[0].t
        if span > 0:
            m.cpu_ms_per_task_hour = cpu / span * 3600 * 1000 / tasks
    opened = fleets.second[name]["connections_opened"] - fleets.first[name]["connections_opened"]
    m.connections_opened_per_hour = opened / (t2 - t1) * 3600
    m.lag_p99 = (fleets.second[name].get("lag") or {}).get("p99")
    return m


def watches_per_ns(entries: list[A.Entry], user: str, at: float) -> Counter[tuple[str, str | None]]:
    """Open watches at ``at`` by (resource, namespace) (``None``: cluster-wide)."""
    opened: dict[str, A.Entry] = {}
    ended: set[str] = set()
    for entry in entries:
        if entry.user != user or entry.verb != "watch" or entry.stamp > at:
            continue
        if entry.stage == "ResponseStarted":
            opened[entry.audit_id] = entry
        else:
            ended.add(entry.audit_id)
    return Counter((e.resource, e.namespace) for i, e in opened.items() if i not in ended)
