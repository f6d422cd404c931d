"""How big and how long each benchmark runs: ``full`` (``make bench``) and ``smoke`` (what
``make test`` runs so the code never rots: tiny sizes, the same code paths)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["FAMILIES", "PROFILES", "Profile"]

FAMILIES = ("local", "detection", "native", "pods", "scale", "queue", "checks", "view")


@dataclass(frozen=True)
class Profile:
    """Sizes and durations.

    Attributes:
        name: ``full`` or ``smoke``.
        rounds: Detection rounds (one run per way and round).
        period: Seconds between detection rounds (rounds overlap: each has ``lead``).
        lead: Seconds from a round's submission to its runs' end.
        tasks: Waiting tasks in one triggerer (scale).
        layouts: Namespaces the waiting tasks are spread over, one layout after the other.
        burst: Tasks that end in the same second, out of ``tasks``.
        window: Seconds of steady waiting over which requests, RSS and lag are measured.
        watch_window: Seconds the bench's observers keep a watch open (see the docs page:
            the hourly figures count each watch's reopenings at the production window).
        pods: Pods of the big JobSet (pods family).
        fanout_jobs: Child Jobs of the fan-out JobSet (native family).
        reconcile_window: Seconds a running run is watched for reconcile requests.
        life_seconds: Seconds the pods of the reconciled run's life run.
        pods_ramp: Seconds from the big JobSet's creation to the end of its pods (every pod
            must run by then).
        starts: Process starts timed (``jobsetctl validate``, ``kubectl``).
        throughput_seconds: Seconds each validation throughput loop runs.
        imports: Import measurements (fresh interpreters) per module.
        queued: Tasks waiting in a Kueue queue in one triggerer (queue family), and as many
            waiting without one beside them.
        queue_namespaces: Namespaces the queued tasks (and the waiting ones) are spread over.
        admitted: Queued tasks admitted at once when the queue's quota is freed.
        checks_submits: Submits timed with and without the server checks (checks family).
        checks_replicas: Replicas of each of the two replicated jobs of those submits.
        view_loads: Timed loads of each page in the browser (view family; its JobSet has
            ``pods`` pods, and ``2 * view_loads`` refreshes of each page's data are timed).
    """

    name: str
    rounds: int
    period: float
    lead: float
    tasks: int
    layouts: tuple[int, ...]
    burst: int
    window: float
    watch_window: int
    pods: int
    fanout_jobs: int
    reconcile_window: float
    life_seconds: int
    pods_ramp: float
    starts: int
    throughput_seconds: float
    imports: int
    queued: int
    queue_namespaces: int
    admitted: int
    checks_submits: int
    checks_replicas: int
    view_loads: int

    def with_overrides(self, pairs: Iterable[str]) -> Profile:
        """This profile with ``FIELD=VALUE`` overrides (``layouts=1,10``: a tuple)."""
        # Each value has its field's type (parsed by the field's declared type below).
        changes: dict[str, Any] = {}
        types = {f.name: f.type for f in dataclasses.fields(self)}
        for pair in pairs:
            name, _, value = pair.partition("=")
            kind = types.get(name)
            if kind is None or name == "name":
                raise ValueError(f"unknown profile field {name!r} (fields: {', '.join(types)})")
            if kind == "int":
                changes[name] = int(value)
            elif kind == "float":
                changes[name] = float(value)
            else:
                changes[name] = tuple(int(v) for v in value.split(",") if v)
        return dataclasses.replace(self, **changes) if changes else self


PROFILES = {
    "full": Profile(
        name="full",
        rounds=80,
        period=2.5,
        lead=7.0,
        tasks=1000,
        layouts=(1, 10, 100),
        burst=100,
        window=60.0,
        watch_window=15,
        pods=1000,
        fanout_jobs=1000,
        reconcile_window=60.0,
        life_seconds=5,
        pods_ramp=90.0,
        starts=10,
        throughput_seconds=3.0,
        imports=5,
        queued=1000,
        queue_namespaces=10,
        admitted=20,
        checks_submits=20,
        checks_replicas=50,
        view_loads=5,
    ),
    "smoke": Profile(
        name="smoke",
        rounds=2,
        period=1.0,
        lead=6.0,
        tasks=4,
        layouts=(2,),
        burst=2,
        window=2.0,
        watch_window=2,
        pods=4,
        fanout_jobs=4,
        reconcile_window=1.0,
        life_seconds=1,
        pods_ramp=5.0,
        starts=1,
        throughput_seconds=0.2,
        imports=1,
        queued=20,
        queue_namespaces=2,
        admitted=4,
        checks_submits=2,
        checks_replicas=2,
        view_loads=1,
    ),
}
