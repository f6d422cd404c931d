"""What exclusive placement promises, read from the pods a run left: each child Job in one
topology domain, and no two Jobs in one domain *at the same time*.

Exclusivity is between pods that exist: the anti-affinity (ours, or the upstream webhook's)
spans every namespace, so on a busy devcluster other tests' pods may hold every zone, a Job's
pods wait, and by the time they are scheduled the other Job's pods may have ended, freeing
their zone. Sharing a zone then is correct; sharing it while both Jobs had live pods is not.
A pod lives from its ``PodScheduled`` condition to its container's ``finishedAt`` (seconds)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any


def _window(pod: Any) -> tuple[datetime, datetime]:
    scheduled = next(
        c.last_transition_time
        for c in pod.status.conditions or ()
        if c.type == "PodScheduled" and c.status == "True"
    )
    finished = max(s.state.terminated.finished_at for s in pod.status.container_statuses)
    return scheduled, finished


def exclusivity_problems(
    pods: Iterable[Any], zone_of_node: Mapping[str, str], job_of: Callable[[Any], str]
) -> list[str]:
    """Every broken promise, in words (an empty list: kept)."""
    zones: dict[str, set[str]] = {}
    windows: dict[str, tuple[datetime, datetime]] = {}
    for pod in pods:
        job = job_of(pod)
        zones.setdefault(job, set()).add(zone_of_node[pod.spec.node_name])
        start, end = _window(pod)
        if job in windows:
            start, end = min(start, windows[job][0]), max(end, windows[job][1])
        windows[job] = (start, end)
    problems = [f"Job {job} spans zones {sorted(z)}" for job, z in zones.items() if len(z) > 1]
    jobs = sorted(zones)
    for i, a in enumerate(jobs):
        for b in jobs[i + 1 :]:
            shared = zones[a] & zones[b]
            (a0, a1), (b0, b1) = windows[a], windows[b]
            if shared and a0 < b1 and b0 < a1:
                problems.append(
                    f"Jobs {a} ({a0:%T}-{a1:%T}) and {b} ({b0:%T}-{b1:%T}) were live in "
                    f"{sorted(shared)} at the same time"
                )
    return problems
