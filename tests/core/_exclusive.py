"""What exclusive placement promises, read from the pods a run left: each child Job in one
topology domain, and no two Jobs in one domain *at the same time*.

Exclusivity is between pods that exist: the anti-affinity (ours, or the upstream webhook's)
spans every namespace, so on a busy devcluster other tests' pods may hold every zone, a Job's
pods wait, and by the time they are scheduled the other Job's pods may have ended, freeing
their zone. Sharing a zone then is correct; sharing it while both Jobs had live pods is not.
A pod lives from its ``PodScheduled`` condition to its container's ``finishedAt`` (seconds).

The tests' pods never finish until :func:`end_once_all_live` has seen every one of them
running, then end together. Pods that merely end at one moment are not enough: a pod that
waited past that moment ends as soon as it runs, and a leader that ends before its followers
are scheduled leaves the scheduler's view (it ignores finished pods), so another Job's leader
may take its zone while those followers still follow it there (upstream's leader/follower
design, kubernetes-sigs/jobset#341). A cold CI run met exactly that."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from tests.cluster.bodies import finish_at

#: The annotation that keeps a kwok pod running until it is patched (tests/cluster/README.md).
NEVER_FINISH = {"devcluster/never-finish": "true"}


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


async def end_once_all_live(core: Any, namespace: str, selector: str, count: int) -> bool:
    """Wait until ``count`` pods of ``selector`` run at once, then end them together (their
    template carries :data:`NEVER_FINISH`); whether they all ran at once. After a minute (less
    than the tests' waits) the pods there are ended anyway (``False``), and so are those that
    come in the next minute (a follower is created late, after the Job controller's backoff),
    so the run finishes and the test can say so; what each pod was doing is printed (pytest
    shows it with the failure). Two such tests at once can wait on each other: each takes its
    turn (the ``exclusive_placement`` fixture), and its pods may use the turn's nodes
    (``tests.cluster.bodies.in_turn``)."""
    deadline = time.monotonic() + 60
    live = False
    pods: list[Any] = []
    while time.monotonic() < deadline and not live:
        pods = await _pods(core, namespace, selector)
        running = [p for p in pods if p.status.phase == "Running"]
        live = len(running) >= count
        if not live:
            await asyncio.sleep(0.5)
    end = {"devcluster/never-finish": "false", "devcluster/finish-at": finish_at(1)}
    ended: set[str] = set()
    late = time.monotonic() + (0 if live else 60)
    while True:
        for pod in pods:
            if pod.metadata.name not in ended:
                ended.add(pod.metadata.name)
                await asyncio.to_thread(
                    core.patch_namespaced_pod,
                    pod.metadata.name,
                    namespace,
                    {"metadata": {"annotations": end}},
                )
        if len(ended) >= count or time.monotonic() >= late:
            break
        await asyncio.sleep(0.5)
        pods = await _pods(core, namespace, selector)
    if not live:
        print(f"{len(ended)} of {count} pods of {selector} came; none ran at once:")
        for pod in pods:
            print(f"  {pod.metadata.name} on {pod.spec.node_name}: {pod.status.phase}", end="")
            print("".join(f"; {c.type} {c.reason}: {c.message}" for c in _unmet(pod)))
    return live


async def _pods(core: Any, namespace: str, selector: str) -> list[Any]:
    listed = await asyncio.to_thread(core.list_namespaced_pod, namespace, label_selector=selector)
    return list(listed.items)


def _unmet(pod: Any) -> list[Any]:
    return [c for c in pod.status.conditions or () if c.status != "True"]
