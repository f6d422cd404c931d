"""What the JobSet tab costs, for a live run of ``pods`` pods, against the plain task-log page.

A real Airflow (API server, DAG processor, scheduler, triggerer: ``tests.airflow._harness``)
runs one deferrable ``JobSetOperator`` whose JobSet has ``pods`` pods (Jobs of 8) that never
finish while it is measured, so the view follows a live run. Once every pod runs and the task
is deferred:

``first paint``   Debian's Chromium (headless) loads the JobSet page of the task try (what the
                  task instance's JobSet tab frames) and the Airflow UI's page of the task
                  instance, whose tab is its log; each page's ``first-contentful-paint``, from
                  the navigation's start (the median of ``view_loads`` loads each, after one
                  untimed load that fills the browser's cache).
``content``       on the same loads, the time until the page shows what it is for: every pod
                  in the grid; the log lines of the try (a line naming the JobSet).
``CPU``           the API server's CPU time, its workers' included (psutil, from outside) per
                  request: a refresh of the JobSet page's data (``/jobset/api/ti``, past the
                  answer shared for 3 s, so each one is built afresh) against a refresh of the
                  log page's (``GET .../logs/{try}``, as the UI reads it, ``application/x-ndjson``).
``bytes``         the size of each of those answers.

The anchor of every figure is the plain task-log page. The JobSet is deleted with the task's
namespace at the end.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from benchmarks.cluster import progress, wait_until
from benchmarks.context import Context
from benchmarks.results import Figure
from benchmarks.workloads import gang

__all__ = ["run"]

ANCHOR = "the task's log page (Airflow UI)"
DAG_ID = "bench_view"
RUN_ID = "bench_view_run"
TASK_ID = "train"
CONN = "bench_view_kube"
LOG = "step 1: loss 0.5"

DAG = """
from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_jobset.operators import JobSetOperator

pod = {
    "metadata": {"annotations": {"devcluster/never-finish": "true", "devcluster/log": %(log)r}},
    "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]},
}
jobset = {
    "apiVersion": "jobset.x-k8s.io/v1alpha2",
    "kind": "JobSet",
    "metadata": {"name": "view"},
    "spec": {"replicatedJobs": [{"name": "w", "replicas": %(replicas)d, "template": {"spec": {
        "backoffLimit": 0, "completions": %(per_job)d, "parallelism": %(per_job)d,
        "template": pod}}}]},
}

with DAG("%(dag)s", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    JobSetOperator(task_id="%(task)s", jobset=jobset, namespace="%(ns)s", deferrable=True,
                   kubernetes_conn_id="%(conn)s", delete_policy="never")
"""


def _tree_cpu(pid: int) -> float:
    """CPU seconds of the process ``pid`` and of every process below it (its workers)."""
    import psutil

    root = psutil.Process(pid)
    total = 0.0
    for process in (root, *root.children(recursive=True)):
        try:
            times = process.cpu_times()
        except psutil.Error:  # ended meanwhile
            continue
        total += times.user + times.system
    return total


def _per_request(
    pid: int, fetch: Callable[[], bytes], times: int, gap: float
) -> tuple[list[float], int]:
    """CPU ms of the API server for each of ``times`` requests ``gap`` seconds apart, and the
    size of the last answer."""
    cpu: list[float] = []
    size = 0
    for _ in range(times):
        time.sleep(gap)
        before = _tree_cpu(pid)
        size = len(fetch())
        cpu.append((_tree_cpu(pid) - before) * 1000)
    return cpu, size


#: Resolves, in the page, with ``[first contentful paint, the moment `ready()` holds]`` (ms
#: since the navigation's start), checking once a frame. The paint entry is queued after the
#: frame is presented, so a page whose content is ready before its first paint is reported
#: (a fast page's case: a cold run once saw it) waits for the entry instead of reading none.
_TIMES = """
const ready = new Function(arguments[0]), done = arguments[arguments.length - 1];
function fcp() {
  const e = performance.getEntriesByName("first-contentful-paint")[0];
  return e ? e.startTime : null;
}
function painted(content) {
  if (fcp() !== null) return done([fcp(), content]);
  new PerformanceObserver((list, observer) => {
    if (fcp() === null) return;  // the first paint, not yet the contentful one
    observer.disconnect();
    done([fcp(), content]);
  }).observe({type: "paint", buffered: true});
}
(function check() {
  let ok = false;
  try { ok = ready(); } catch (e) { ok = false; }
  if (ok) painted(performance.now()); else requestAnimationFrame(check);
})();
"""


def _loads(
    port: int, token: str, pods: int, marker: str, loads: int
) -> dict[str, list[tuple[float, float]]]:
    """Timed loads of the two pages, alternating, after one untimed load of each."""
    from tests.airflow._browser import browser

    base = f"http://127.0.0.1:{port}"
    pages = {
        "ours": (
            f"{base}/jobset/ti?dag_id={DAG_ID}&run_id={RUN_ID}&task_id={TASK_ID}",
            f"return document.body.dataset.loaded && "
            f"document.querySelectorAll('.pod').length >= {pods};",
        ),
        "anchor": (
            f"{base}/dags/{DAG_ID}/runs/{RUN_ID}/tasks/{TASK_ID}",
            f"return document.body.innerText.includes({json.dumps(marker)});",
        ),
    }
    found: dict[str, list[tuple[float, float]]] = {"ours": [], "anchor": []}
    with browser() as chromium:
        chromium.get(f"{base}/jobset/ti")  # the API server's site: its session cookie
        chromium.cookie("_token", token)
        chromium.timeouts(script=180)
        for i in range(loads + 1):
            for who, (url, ready) in pages.items():
                chromium.get(url)
                fcp, content = chromium.script_async(_TIMES, ready)
                if i:
                    found[who].append((float(fcp or "nan"), float(content)))
    return found


def run(ctx: Context) -> list[Figure]:
    from tests.airflow._harness import airflow_processes

    profile = ctx.profile
    replicas, per_job = gang(profile.pods)
    pods = per_job * replicas
    (namespace,) = ctx.cluster.namespaces("bench-view", 1)
    admin = json.dumps(
        {"conn_type": "kubernetes", "extra": {"kube_config_path": str(ctx.cluster.kubeconfig)}}
    )
    source = DAG % {
        "log": LOG,
        "replicas": replicas,
        "per_job": per_job,
        "dag": DAG_ID,
        "task": TASK_ID,
        "ns": namespace,
        "conn": CONN,
    }
    env = {f"AIRFLOW_CONN_{CONN.upper()}": admin}
    with airflow_processes({DAG_ID: source}, extra_env=env) as airflow:
        airflow.wait_parsed(DAG_ID)
        airflow.unpause(DAG_ID)
        airflow.trigger(DAG_ID, RUN_ID)

        def running() -> bool:  # the namespace holds the run's pods only
            listed = ctx.cluster.core.list_namespaced_pod(namespace)
            live: int = sum(p.status.phase == "Running" for p in listed.items)
            return live >= pods

        def deferred() -> bool:
            path = f"/api/v2/dags/{DAG_ID}/dagRuns/{RUN_ID}/taskInstances/{TASK_ID}"
            return bool((airflow.answer("GET", path) or {}).get("state") == "deferred")

        wait_until(running, 120 + pods / 5, f"{pods} pods of the view's JobSet running", 1)
        wait_until(deferred, 120, "the view's task deferred", 1)
        server = airflow.by_command["api-server"].pid
        port = airflow.port
        token = airflow.token()
        ti = f"dag_id={DAG_ID}&run_id={RUN_ID}&task_id={TASK_ID}"
        logs = f"/api/v2/dags/{DAG_ID}/dagRuns/{RUN_ID}/taskInstances/{TASK_ID}/logs/1"
        # A first answer of each (the view's watch of the run starts; the log is found).
        first = json.loads(airflow.read(f"/jobset/api/ti?{ti}", token))
        assert first.get("found"), first
        marker = f"{namespace}/view"
        assert marker in airflow.read(logs, token, accept="application/x-ndjson").decode(), marker
        times = max(3, profile.view_loads * 2)
        ours_cpu, ours_bytes = _per_request(
            server, lambda: airflow.read(f"/jobset/api/ti?{ti}", token), times, 3.2
        )
        anchor_cpu, anchor_bytes = _per_request(
            server, lambda: airflow.read(logs, token, accept="application/x-ndjson"), times, 3.2
        )
        loads = _loads(port, token, pods, marker, profile.view_loads)
    ctx.cluster.delete_namespaces([namespace])
    ours_content = [content for _, content in loads["ours"]]
    anchor_content = [content for _, content in loads["anchor"]]
    progress(
        f"view: content {statistics.median(ours_content):.0f} ms "
        f"(log page {statistics.median(anchor_content):.0f} ms), "
        f"CPU a refresh {statistics.median(ours_cpu):.0f} ms "
        f"(log page {statistics.median(anchor_cpu):.0f} ms)"
    )
    common: dict[str, Any] = {"anchor_name": ANCHOR, "pods": pods, "jobs": replicas}

    def medians(
        measure: str, unit: str, ours: list[float], anchor: list[float], **more: Any
    ) -> Figure:
        """The figure of ``measure``: the medians of ours and the anchor's, and our worst."""
        return Figure.of(
            f"view: {measure} ({pods} pods)",
            unit,
            statistics.median(ours),
            statistics.median(anchor),
            n=len(ours),
            max=max(ours),
            **common,
            **more,
        )

    return [
        medians(
            "first contentful paint",
            "ms",
            [fcp for fcp, _ in loads["ours"]],
            [fcp for fcp, _ in loads["anchor"]],
        ),
        medians(
            "time to content",
            "ms",
            ours_content,
            anchor_content,
            content="every pod in the grid; the log page: the try's log lines",
        ),
        medians(
            "API-server CPU per refresh",
            "ms",
            ours_cpu,
            anchor_cpu,
        ),
        medians("bytes per refresh", "bytes", [float(ours_bytes)], [float(anchor_bytes)]),
    ]
