"""What the server checks cost a submit: requests and milliseconds.

Before a run's first create, the lifecycle dry-runs the run object, one child Job and one pod a
replicated job (and the native Service): ``1 + 2 * replicated jobs`` requests, whatever the
replicas. Ours is the check of a JobSet of two replicated jobs of ``checks_replicas``
replicas each; the anchor is the same submit without the checks (the run object's create,
and for the native backend its first reconcile pass, which creates the Service and every
child Job). Both in this process, through the lifecycle's one door, on the bench cluster;
requests are the client's own count (what it sent, retries included).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from benchmarks.cluster import progress
from benchmarks.context import Context
from benchmarks.results import Figure

__all__ = ["run"]

BACKENDS = ("controller", "native")
ANCHOR = "the same submit without the checks"


def _jobset(name: str, replicas: int) -> Any:
    from jobset_core.models import load_jobset

    pod = {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
    rjobs = [
        {"name": rjob, "replicas": replicas, "template": {"spec": {"template": {"spec": pod}}}}
        for rjob in ("leader", "workers")
    ]
    return load_jobset(
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": name},
            "spec": {"replicatedJobs": rjobs, "suspend": True},
        }
    )


async def _measure(ctx: Context, backend: str, namespace: str) -> dict[str, list[float]]:
    """Per submit: the check's ms and requests, then a submit's without the checks."""
    from jobset_core.lifecycle import ClientSettings, RunRequest, session

    settings = ClientSettings(kubeconfig_path=str(ctx.cluster.kubeconfig))
    out: dict[str, list[float]] = {"check_ms": [], "check_req": [], "plain_ms": [], "plain_req": []}
    profile = ctx.profile
    async with session(settings, server_checks=False) as lifecycle:
        stats = lifecycle.client.stats
        for i in range(profile.checks_submits + 1):  # the first warms up
            request = RunRequest(
                jobset=_jobset(f"chk-{backend[:4]}-{i}", profile.checks_replicas),
                namespace=namespace,
                backend=backend,  # type: ignore[arg-type]
            )
            checked = await lifecycle.check(request)
            assert not checked.problems, checked.problems
            before, began = sum(stats.requests.values()), time.perf_counter()
            started = await lifecycle.start(request)
            took = (time.perf_counter() - began) * 1000
            sent = sum(stats.requests.values()) - before
            await lifecycle.runs.delete(started.handle, wait=False)
            if i:
                out["check_ms"].append(checked.seconds * 1000)
                out["check_req"].append(float(checked.requests))
                out["plain_ms"].append(took)
                out["plain_req"].append(float(sent))
    return out


def run(ctx: Context) -> list[Figure]:
    figures: list[Figure] = []
    profile = ctx.profile
    for backend in BACKENDS:
        (namespace,) = ctx.cluster.namespaces(f"bench-chk-{backend[:4]}", 1)
        found = asyncio.run(_measure(ctx, backend, namespace))
        progress(f"checks ({backend}): {statistics.median(found['check_ms']):.0f} ms a submit")
        params: dict[str, Any] = {
            "anchor_name": ANCHOR,
            "replicated_jobs": 2,
            "replicas": profile.checks_replicas,
        }
        figures.append(
            Figure.of(
                f"checks: ms per submit, p50 ({backend})",
                "ms",
                statistics.median(found["check_ms"]),
                statistics.median(found["plain_ms"]),
                n=len(found["check_ms"]),
                max=max(found["check_ms"]),
                **params,
            )
        )
        figures.append(
            Figure.of(
                f"checks: requests per submit ({backend})",
                "requests",
                max(found["check_req"]),
                statistics.median(found["plain_req"]),
                n=len(found["check_req"]),
                **params,
            )
        )
    return figures
