"""What the observer's pod and Event watches cost, for a JobSet of 1,000 pods.

The JobSet (125 Jobs of 8 pods) and, beside it, the anchor's batch Job of as many pods start
together; their pods run, then all end in the same second. Four subject processes wait from
the start to the end:

``ours``       a worker-mode wait of the JobSet (the core's ``Run`` over a run-scoped
               observer: JobSet, Jobs, pods, Warning Events);
``lean``       the same wait without the pod and Event informers: ``ours - lean`` is what
               those watches add;
``anchor``     ``KubernetesJobTrigger`` on the Job (it polls the Job and never looks at pods);
``floor``      raw watches (official client) of every JobSet, Job and pod: what receiving the
               same stream costs with nothing kept.

Measured: CPU seconds and RSS growth of each process (from outside), API requests (server),
watch events received (ours), and the detection latency at the end.
"""

from __future__ import annotations

import time
from typing import Any, TypedDict

from benchmarks import audit as A
from benchmarks.context import Context
from benchmarks.proc import Subject
from benchmarks.results import Figure
from benchmarks.workloads import finish_at, gang, job_body, jobset_body

__all__ = ["run"]

ANCHOR = "KubernetesJobTrigger (poll 10 s) on a Job of as many pods"
FLOOR = "raw watches (official client), nothing kept"


class _Common(TypedDict):
    """The params every figure of the family carries."""

    pods: int
    jobs: int
    anchor_name: str


def _cost(
    ctx: Context, subject: Subject, baseline: Any, start: float, end: float
) -> dict[str, float]:
    samples = ctx.sampler.between(subject.name, start, end)
    if not samples or baseline is None:
        return {"cpu": float("nan"), "rss": float("nan")}
    return {
        "cpu": samples[-1].cpu - baseline.cpu,
        "rss": max(s.rss for s in samples) - baseline.rss,
    }


def run(ctx: Context) -> list[Figure]:
    pods = ctx.profile.pods
    replicas, per_job = gang(pods)
    namespace = ctx.cluster.namespaces("bench-pods", 1)[0]
    # Long enough for every pod to be created and run before they all end.
    ramp = ctx.profile.pods_ramp
    run_id = ctx.cluster.run
    # Created first, waited for by every subject; the pods start at once, end together.
    ends = time.time() + ramp
    body = jobset_body(
        "big", annotations=finish_at(ends), run=run_id, replicas=replicas, parallelism=per_job
    )
    made = ctx.cluster.custom.create_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", namespace, "jobsets", body
    )
    job = job_body("big-job", annotations=finish_at(ends), run=run_id, pods=replicas * per_job)
    ctx.cluster.batch.create_namespaced_job(namespace, job)
    ctx.mark_audit()
    started = time.time()
    identities = {name: ctx.identity(f"pods-{name}") for name in ("ours", "lean", "anchor")}
    waiter = {
        "mode": "wait",
        "backend": "controller",
        "namespace": namespace,
        "name": "big",
        "uid": made["metadata"]["uid"],
    }
    subjects = {
        "ours": ctx.subject("pods-ours", "benchmarks.waiter", waiter, identities["ours"]),
        "lean": ctx.subject(
            "pods-lean", "benchmarks.waiter", {**waiter, "lean": True}, identities["lean"]
        ),
    }
    task = {"ns": namespace, "name": "big-job", "job": "big-job", "pod": "big-job-0"}
    subjects["anchor"] = ctx.subject(
        "pods-anchor",
        "benchmarks.fleet",
        {"kind": "kjt", "tasks": [task], "ready_timeout": 30},
        identities["anchor"],
    )
    baselines = {}
    for name, subject in subjects.items():
        subject.wait_for("baseline", 300)
        baselines[name] = ctx.sampler.look(subject)
        subject.send(cmd="go")
    ctx.sampler.add(subjects.values())
    with ctx.floor(namespace) as floor:
        floor_base = ctx.sampler.look(floor.subject)
        ctx.sampler.add([floor.subject])
        fired: dict[str, float] = {}
        for name in ("ours", "lean"):
            fired[name] = float(subjects[name].wait_for("fired", ramp + 300)[0]["at"])
        fired["anchor"] = float(subjects["anchor"].wait_for("fired", 120)[0]["at"])
        time.sleep(2)
        finished = time.time()
        stats = {
            name: subjects[name].ask("sample", "sample")["observer"] for name in ("ours", "lean")
        }
        costs = {
            name: _cost(ctx, s, baselines[name], started, finished) for name, s in subjects.items()
        }
        costs["floor"] = _cost(ctx, floor.subject, floor_base, started, finished)
        seen = floor.seen()
    for subject in subjects.values():
        subject.stop()
    entries = ctx.read_audit()
    writes = A.Writes(entries)
    requests = {
        name: sum(A.requests_of(entries, identities[name].user, started, finished).values())
        if ctx.audited
        else None
        for name in ("ours", "lean", "anchor")
    }
    floor_requests = (
        sum(A.requests_of(entries, floor.identity.user, started, finished).values())
        if ctx.audited
        else None
    )

    def latency(resource: str, name: str, at: float) -> float | None:
        sighted = seen.get((resource, namespace, name), at)
        decided = writes.decisive(resource, namespace, name, sighted) if ctx.audited else sighted
        return None if decided is None else (at - decided) * 1000

    ours, lean, anchor, raw = costs["ours"], costs["lean"], costs["anchor"], costs["floor"]
    events = {name: s.get("events", 0) for name, s in stats.items()}
    common: _Common = {"pods": pods, "jobs": replicas, "anchor_name": ANCHOR}
    figures = [
        Figure.of(
            f"pods: CPU the pod and Event watches add ({pods} pods)",
            "s",
            ours["cpu"] - lean["cpu"],
            anchor["cpu"],
            floor=raw["cpu"],
            floor_name=FLOOR,
            ours_total=ours["cpu"],
            lean_total=lean["cpu"],
            note="the anchor's figure is its whole wait's CPU (it never watches pods)",
            **common,
        ),
        Figure.of(
            f"pods: RSS the pod and Event watches add, per pod ({pods} pods)",
            "KiB",
            (ours["rss"] - lean["rss"]) / 1024 / pods,
            anchor["rss"] / 1024 / pods,
            floor=raw["rss"] / 1024 / pods,
            floor_name=FLOOR,
            ours_total_mib=ours["rss"] / 2**20,
            lean_total_mib=lean["rss"] / 2**20,
            kept=stats["ours"].get("kept"),
            **common,
        ),
        Figure.of(
            f"pods: API requests of the whole wait ({pods} pods)",
            "requests",
            requests["ours"],
            requests["anchor"],
            floor=floor_requests,
            floor_name=FLOOR,
            lean=requests["lean"],
            watch_events=events,
            **common,
        ),
        Figure.of(
            f"pods: detection when the {pods} pods end",
            "ms",
            latency("jobsets", "big", fired["ours"]),
            latency("jobs", "big-job", fired["anchor"]),
            floor=None,
            lean=latency("jobsets", "big", fired["lean"]),
            **common,
        ),
    ]
    ctx.cluster.delete_namespaces([namespace], wait=True)
    return figures
