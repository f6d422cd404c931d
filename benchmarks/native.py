"""The native backend against the upstream controller: fan-out and reconcile requests.

``fan-out``  submit → every child Job of a JobSet of ``fanout_jobs`` replicated Jobs exists:
             the native backend creates them from the waiting process (50 at a time), the
             controller from its own; the same JobSet, each from a worker-mode waiter
             (:mod:`benchmarks.waiter`), timed from the waiter's submission to the last Job
             a raw watch of the namespace sees.
``requests`` what reconciling one run costs at the API server: over its whole life (submit
             → completed, 4 Jobs), and per hour while it runs with nothing happening. Ours is
             every request of the native waiter but its watches and their lists; the
             anchor every request of the JobSet controller about that run's namespace.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any

from benchmarks import audit as A
from benchmarks.cluster import progress
from benchmarks.context import Context
from benchmarks.results import Figure
from benchmarks.workloads import NEVER, jobset_body

__all__ = ["run"]

CONTROLLER_AGENT = "jobset/"
ANCHOR = "the upstream JobSet controller (v0.12.0)"


class JobCounter:
    """A raw watch of a namespace's Jobs: when the n-th one appeared.

    A watch the API server ends (a slow reader of a burst of a thousand creations is cut
    off) is resumed from the last version it delivered, or listed again when that version
    is gone, so the count never stalls.
    """

    def __init__(self, ctx: Context, namespace: str, wanted: int) -> None:
        self.wanted = wanted
        self.done = threading.Event()
        self.at: float | None = None
        self.resumed = 0
        self._names: set[str] = set()
        self._thread = threading.Thread(target=self._watch, args=(ctx, namespace), daemon=True)
        self._thread.start()

    def _add(self, names: Iterable[str]) -> None:
        self._names.update(names)
        if len(self._names) >= self.wanted and self.at is None:
            self.at = time.time()
            self.done.set()

    def _watch(self, ctx: Context, namespace: str) -> None:
        from kubernetes import watch
        from kubernetes.client.rest import ApiException

        batch = ctx.cluster.batch
        version: str | None = None
        first = True
        while self.at is None:
            if not first:
                self.resumed += 1
            first = False
            try:
                if version is None:
                    listed = batch.list_namespaced_job(namespace)
                    self._add(j.metadata.name for j in listed.items)
                    version = listed.metadata.resource_version
                stream = watch.Watch()
                for event in stream.stream(
                    batch.list_namespaced_job,
                    namespace,
                    resource_version=version,
                    timeout_seconds=600,
                ):
                    obj = event["object"]
                    version = obj.metadata.resource_version
                    self._add([obj.metadata.name])
                    if self.at is not None:
                        stream.stop()
                        break
            except ApiException as error:
                if error.status == 410:
                    version = None
                else:
                    time.sleep(0.5)
            except Exception:  # a dropped connection: resume from the last version
                time.sleep(0.2)


def _fanout(ctx: Context, backend: str) -> dict[str, Any]:
    jobs = ctx.profile.fanout_jobs
    namespace = ctx.cluster.namespaces(f"bench-fan-{backend[0]}", 1)[0]
    identity = ctx.identity(f"{backend}-waiter")
    body = jobset_body("fanout", annotations=NEVER, run=ctx.cluster.run, replicas=jobs, dns=True)
    counter = JobCounter(ctx, namespace, jobs)
    spec = {"mode": "execute", "backend": backend, "namespace": namespace, "body": body}
    subject = ctx.subject(f"fanout-{backend}", "benchmarks.waiter", spec, identity)
    subject.wait_for("baseline", 120)
    subject.send(cmd="go")
    submitted = float(subject.wait_for("submitting", 60)[0]["t"])
    if not counter.done.wait(600):
        raise TimeoutError(f"{backend}: fewer than {jobs} Jobs after 10 minutes")
    took = (counter.at or 0.0) - submitted
    progress(f"fan-out of {jobs} Jobs, {backend}: {took:.2f}s (watch resumed {counter.resumed}x)")
    subject.stop()
    # Wait until they are gone: the next measurement must not share the machine with the
    # deletion of its Jobs and pods.
    ctx.cluster.delete_namespaces([namespace], wait=True)
    return {"seconds": took, "resumed": counter.resumed}


def _reconcile_counts(
    entries: list[A.Entry], namespace: str, user: str | None, start: float, end: float
) -> int:
    """Reconcile requests about ``namespace`` in ``[start, end)``: the user's (ours) or the
    JobSet controller's (``user=None``), watches and lists left out."""
    seen: set[str] = set()
    count = 0
    for entry in entries:
        if entry.namespace != namespace or not start <= entry.received < end:
            continue
        mine = entry.user == user if user is not None else entry.agent.startswith(CONTROLLER_AGENT)
        if not mine or entry.verb in ("watch", "list") or entry.audit_id in seen:
            continue
        seen.add(entry.audit_id)
        count += 1
    return count


def _requests(ctx: Context) -> list[Figure]:
    if not ctx.audited:
        progress("native requests: skipped (needs the API server's audit log)")
        return []
    results: dict[str, dict[str, float]] = {}
    for backend in ("native", "controller"):
        identity = ctx.identity(f"{backend}-waiter")
        namespace = ctx.cluster.namespaces(f"bench-rec-{backend[0]}", 1)[0]
        ctx.mark_audit()
        life = jobset_body(
            "life",
            annotations={"devcluster/run-seconds": str(ctx.profile.life_seconds)},
            run=ctx.cluster.run,
            replicas=4,
            dns=True,
        )
        spec = {"mode": "execute", "backend": backend, "namespace": namespace, "body": life}
        subject = ctx.subject(f"life-{backend}", "benchmarks.waiter", spec, identity)
        subject.wait_for("baseline", 120)
        subject.send(cmd="go")
        submitted = float(subject.wait_for("submitting", 60)[0]["t"])
        fired = float(subject.wait_for("fired", 300)[0]["at"])
        subject.stop()
        steady = jobset_body("steady", annotations=NEVER, run=ctx.cluster.run, replicas=4, dns=True)
        spec = {"mode": "execute", "backend": backend, "namespace": namespace, "body": steady}
        subject = ctx.subject(f"steady-{backend}", "benchmarks.waiter", spec, identity)
        subject.wait_for("baseline", 120)
        subject.send(cmd="go")
        subject.wait_for("submitting", 60)
        time.sleep(min(10.0, ctx.profile.reconcile_window))  # every Job and pod running
        t1 = time.time()
        time.sleep(ctx.profile.reconcile_window)
        t2 = time.time()
        subject.stop()
        entries = ctx.read_audit()
        user = identity.user if backend == "native" else None
        results[backend] = {
            "life": _reconcile_counts(entries, namespace, user, submitted - 1, fired + 1),
            "steady": _reconcile_counts(entries, namespace, user, t1, t2) / (t2 - t1) * 3600,
            "life_seconds": fired - submitted,
        }
        ctx.cluster.delete_namespaces([namespace])
    ours, anchor = results["native"], results["controller"]
    return [
        Figure.of(
            "native: reconcile requests over a run's life (4 Jobs, submit → completed)",
            "requests",
            ours["life"],
            anchor["life"],
            anchor_name=ANCHOR,
            counted="every request but watches and lists (ours: the native waiter's; the "
            "controller's about the run's namespace)",
            life_seconds=ours["life_seconds"],
            anchor_life_seconds=anchor["life_seconds"],
        ),
        Figure.of(
            "native: reconcile requests per run-hour while it runs",
            "requests",
            ours["steady"],
            anchor["steady"],
            anchor_name=ANCHOR,
            window_seconds=ctx.profile.reconcile_window,
        ),
    ]


def run(ctx: Context) -> list[Figure]:
    fan: dict[str, list[float]] = {"native": [], "controller": []}
    resumed: dict[str, int] = {}
    for backend in ("native", "controller"):
        found = _fanout(ctx, backend)
        fan[backend].append(found["seconds"])
        resumed[backend] = found["resumed"]
    figures = [
        Figure.of(
            f"native: fan-out, submit → all {ctx.profile.fanout_jobs} child Jobs exist",
            "s",
            fan["native"][0],
            fan["controller"][0],
            anchor_name=ANCHOR,
            watch_resumed=resumed,
            measured="from the waiter's submission to the last Job "
            "a raw watch of the namespace sees",
        )
    ]
    return figures + _requests(ctx)
