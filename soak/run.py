"""Carry out a soak plan (:mod:`soak.mix`) on the running devcluster and count what happened.

Real Airflow processes (API server, DAG processor, scheduler with the LocalExecutor,
triggerer; ``tests/airflow/_harness.py``) run one DAG run of every task at once. The workers
(the scheduler's) and the triggerer are two service accounts bound to nothing but the shipped
Roles, with exec-plugin tokens that live :data:`TOKEN_TTL` seconds, and reach the API server
through a fault proxy on loopback (``tests/cluster/faultproxy.py``) that cuts watches with
410 Gone and answers bursts of 429 on command. The faults of the plan strike at their
moments: the kube-apiserver and the JobSet controller are restarted (``devcluster.py
restart``), the triggerer and task processes are SIGKILLed (the triggerer is started again;
a killed task's next try reattaches).

A watcher of our own (the admin client, straight to the API server, once a second) records
every JobSet and anchor of the namespace: its uid, when it reached a terminal condition, and
when it went away. From that, Airflow's REST API and the API server's audit log of the two
identities, :func:`summarise` counts what the issue asks for; :func:`render` prints it.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soak.mix import Plan, dag_source
from tests.airflow._harness import AirflowProcesses, airflow_processes
from tests.cluster.faultproxy import FaultProxy
from tests.cluster.identities import Identity, bind_role, identity
from tests.cluster.localcluster import auth as devcluster_auth
from tests.cluster.pytest_devcluster import DevCluster

__all__ = ["TOKEN_TTL", "Soak", "render", "run_soak", "summarise"]

REPO = Path(__file__).resolve().parents[1]
DEVCLUSTER = REPO / "tests" / "cluster" / "devcluster.py"
DAG_ID = "soak"
RUN_ID = "soak_run"
#: Seconds each token of the two identities lives (a soak outlives many of them).
TOKEN_TTL = 45.0
#: How long the DAG run may take after the window before it counts as missed.
GRACE = 240.0
ANCHOR_SELECTOR = "jobset-core/anchor=native"
TASK_LABEL = "airflow-jobset/task-id"


@dataclass
class Seen:
    """What the watcher saw of one JobSet or anchor."""

    kind: str
    task_id: str
    uid: str
    first_seen: float
    terminal: str | None = None
    terminal_at: float | None = None  # the condition's lastTransitionTime (epoch seconds)
    gone_at: float | None = None


@dataclass
class Soak:
    """Everything a soak recorded (plain data; :func:`summarise` reads it)."""

    plan: Plan
    namespace: str
    started: float = 0.0
    finished: float = 0.0
    faults: list[dict[str, Any]] = field(default_factory=list)
    seen: dict[str, Seen] = field(default_factory=dict)  # uid -> what the watcher saw
    tis: list[dict[str, Any]] = field(default_factory=list)
    leftovers: dict[str, list[str]] = field(default_factory=dict)
    audit: list[dict[str, Any]] = field(default_factory=list)
    users: dict[str, str] = field(default_factory=dict)  # role -> username
    proxy: dict[str, Any] = field(default_factory=dict)
    run_state: str = ""
    airflow_home: str = ""
    leaks: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------- the watcher


def _stamp(text: str | None) -> float | None:
    return _iso(text)


def _terminal(status: dict[str, Any]) -> tuple[str | None, float | None]:
    for condition in status.get("conditions") or []:
        if condition.get("type") in ("Completed", "Failed") and condition.get("status") == "True":
            return condition["type"], _stamp(condition.get("lastTransitionTime"))
    return None, None


def _objects(dc: DevCluster, namespace: str) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(kind, metadata, status) of every JobSet and anchor in the namespace."""
    found = []
    jobsets = dc.custom.list_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", namespace, "jobsets", _request_timeout=10
    )["items"]
    for item in jobsets:
        found.append(("jobset", item["metadata"], item.get("status") or {}))
    anchors = dc.core.list_namespaced_config_map(
        namespace, label_selector=ANCHOR_SELECTOR, _request_timeout=10
    ).items
    for anchor in anchors:
        meta = {"uid": anchor.metadata.uid, "labels": anchor.metadata.labels or {}}
        status = json.loads((anchor.data or {}).get("status.json") or "{}")
        found.append(("anchor", meta, status))
    return found


@contextlib.contextmanager
def watching(dc: DevCluster, soak: Soak) -> Iterator[None]:
    """Record the namespace's JobSets and anchors once a second until the block ends (an API
    server that is down for a moment is waited for)."""
    stop = threading.Event()

    def look() -> None:
        try:
            objects = _objects(dc, soak.namespace)
        except Exception:  # the API server restarting: look again in a second
            return
        now = time.time()
        present = set()
        for kind, meta, status in objects:
            uid = meta["uid"]
            present.add(uid)
            seen = soak.seen.get(uid)
            if seen is None:
                task_id = (meta.get("labels") or {}).get(TASK_LABEL, "?")
                seen = soak.seen[uid] = Seen(kind, task_id, uid, now)
            if seen.terminal is None:
                seen.terminal, seen.terminal_at = _terminal(status)
        for seen in soak.seen.values():
            if seen.gone_at is None and seen.uid not in present:
                seen.gone_at = now

    def loop() -> None:
        while not stop.wait(1.0):
            look()

    thread = threading.Thread(target=loop, name="soak-watcher", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(30)
        look()


# ---------------------------------------------------------------------- faults


def _devcluster(*args: str, state_dir: Path) -> None:
    env = dict(os.environ, DEVCLUSTER_STATE_DIR=str(state_dir))
    subprocess.run(
        [sys.executable, str(DEVCLUSTER), *args],
        env=env,
        check=True,
        timeout=300,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _worker_processes(ctx: AirflowProcesses, soak: Soak) -> list[tuple[int, str]]:
    """(pid, task id) of the task processes running a worker-mode JobSet wait right now."""
    worker_tasks = {t.task_id for t in soak.plan.tasks if t.mode == "worker"}
    running = {}
    answer = ctx.api("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{RUN_ID}/taskInstances?limit=1000")
    for ti in answer["task_instances"]:
        if ti["state"] == "running" and ti["task_id"] in worker_tasks:
            running[str(ti["id"])] = ti["task_id"]
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            title = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
            match = re.fullmatch(r"airflow worker -- (\S+)", title)
            if match and match.group(1) in running:
                found.append((int(entry.name), running[match.group(1)]))
    return sorted(found)


def strike(
    name: str, ctx: AirflowProcesses, proxy: FaultProxy, soak: Soak, rand: random.Random
) -> str:
    """Carry out one fault; what was done, for the record."""
    state = Path(os.environ["DEVCLUSTER_STATE_DIR"])
    if name == "apiserver-restart":
        _devcluster("restart", "kube-apiserver", "--down", "2", state_dir=state)
        return "kube-apiserver stopped for 2s and started again"
    if name == "jobset-controller-restart":
        _devcluster("restart", "jobset", "--kill", state_dir=state)
        return "JobSet controller SIGKILLed and started again"
    if name == "triggerer-kill":
        ctx.restart("triggerer", signal.SIGKILL)
        return "triggerer SIGKILLed and started again"
    if name == "worker-kill":
        for _ in range(20):  # a worker-mode task may be between tries: look again
            workers = _worker_processes(ctx, soak)
            if workers:
                pid, task_id = rand.choice(workers)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                return f"task process of {task_id} (pid {pid}) SIGKILLed"
            time.sleep(1)
        raise RuntimeError("no worker-mode task was running to be killed")
    if name == "watch-cut-410":
        cut = proxy.cut_watches("gone")
        if not cut:
            raise RuntimeError("no watch was open to be cut")
        return f"{cut} watches and followed logs cut (410 Gone)"
    if name == "throttle-429":
        # Open watches send nothing: cut them as the burst begins, so the reconnects (lists
        # and watches) meet it, as a reconnect storm meets priority and fairness.
        before = proxy.stats.throttled
        proxy.throttle(6.0, retry_after=1, fraction=0.7)
        cut = proxy.cut_watches("gone", logs=False)
        time.sleep(6.0)
        refused = proxy.stats.throttled - before
        if not refused:
            raise RuntimeError("the burst met no request")
        return f"429 (Retry-After: 1) to 70% for 6s, {cut} watches cut: {refused} refused"
    raise ValueError(f"unknown fault {name!r}")


# ---------------------------------------------------------------------- the run


def _identities(dc: DevCluster, soak: Soak, folder: Path, proxy: FaultProxy) -> dict[str, Identity]:
    assert dc.state_dir is not None
    found = {}
    for side in ("worker", "triggerer"):
        who = identity(
            dc.state_dir, folder, soak.namespace, f"airflow-{side}", ttl=TOKEN_TTL, server=proxy.url
        )
        for backend in ("controller", "native"):
            bind_role(dc, soak.namespace, f"jobset-airflow-{side}-{backend}", who)
        found[side] = who
        soak.users[side] = who.username
    return found


def _task_instances(ctx: AirflowProcesses) -> list[dict[str, Any]]:
    path = f"/api/v2/dags/{DAG_ID}/dagRuns/{RUN_ID}/taskInstances?limit=1000"
    tis: list[dict[str, Any]] = ctx.api("GET", path)["task_instances"]
    return tis


def _leftovers(dc: DevCluster, namespace: str) -> dict[str, list[str]]:
    """What is left in the namespace of the runs (its Roles, bindings, service accounts and
    the root CA ConfigMap are the soak's own)."""
    core, batch = dc.core, dc.batch
    jobsets = dc.custom.list_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", namespace, "jobsets"
    )["items"]
    return {
        "jobsets": [j["metadata"]["name"] for j in jobsets],
        "anchors": [
            m.metadata.name
            for m in core.list_namespaced_config_map(
                namespace, label_selector=ANCHOR_SELECTOR
            ).items
        ],
        "jobs": [j.metadata.name for j in batch.list_namespaced_job(namespace).items],
        "pods": [p.metadata.name for p in core.list_namespaced_pod(namespace).items],
        "services": [s.metadata.name for s in core.list_namespaced_service(namespace).items],
    }


def run_soak(plan: Plan, dc: DevCluster, *, log: Any = print) -> Soak:
    """Carry out ``plan`` in a namespace of its own (deleted at the end)."""
    assert dc.state_dir is not None
    os.environ["DEVCLUSTER_STATE_DIR"] = str(dc.state_dir)
    namespace = dc.create_namespace("soak")
    soak = Soak(plan, namespace)
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"jobset-soak-{namespace}"
    folder.mkdir(mode=0o700, exist_ok=True)
    timeout = plan.window * 2 + 120
    try:
        with FaultProxy(dc.state_dir, seed=plan.seed) as proxy:
            who = _identities(dc, soak, folder, proxy)
            dags = {DAG_ID: dag_source(plan, dag_id=DAG_ID, namespace=namespace, timeout=timeout)}
            process_env = {
                "scheduler": {"AIRFLOW_CONN_KUBERNETES_DEFAULT": who["worker"].connection()},
                "triggerer": {"AIRFLOW_CONN_KUBERNETES_DEFAULT": who["triggerer"].connection()},
            }
            # A worker-mode wait holds a slot; a deferred task needs one to start and resume.
            slots = sum(1 for t in plan.tasks if t.mode == "worker") + 6
            with airflow_processes(dags, parallelism=slots, process_env=process_env) as ctx:
                soak.airflow_home = str(ctx.home)
                ctx.wait_parsed(DAG_ID)
                ctx.cli("dags", "unpause", DAG_ID)
                with watching(dc, soak):
                    ctx.cli("dags", "trigger", DAG_ID, "--run-id", RUN_ID)
                    waiting = _all_waiting(ctx, soak)
                    soak.started = time.time()
                    log(f"soak: {waiting} of {len(plan.tasks)} tasks waiting in {namespace}")
                    _strike_all(ctx, proxy, soak, log)
                    _wait_for_the_run(ctx, soak)
                    log(f"soak: DAG run {soak.run_state} after {soak.finished - soak.started:.0f}s")
                    soak.leftovers = _settled(dc, namespace)
                soak.proxy = proxy.stats.snapshot()
                soak.leaks = scan_for_credentials(ctx.home, dc.state_dir)
        soak.audit = devcluster_auth.audit_events(dc.state_dir, users=set(soak.users.values()))
    finally:
        dc.delete_namespace(namespace)
        for path in folder.iterdir():
            path.unlink()
        folder.rmdir()
    return soak


def _strike_all(ctx: AirflowProcesses, proxy: FaultProxy, soak: Soak, log: Any) -> None:
    """Each fault of the plan at its moment (a fault that could not strike is recorded as
    FAILED: a finding, never skipped)."""
    rand = random.Random(soak.plan.seed)
    for fault in soak.plan.faults:
        delay = soak.started + fault.at - time.time()
        if delay > 0:
            time.sleep(delay)
        t = time.time()
        try:
            what = strike(fault.name, ctx, proxy, soak, rand)
        except Exception as error:
            what = f"FAILED: {type(error).__name__}: {error}"
        at = round(t - soak.started, 1)
        took = round(time.time() - t, 1)
        soak.faults.append(
            {"name": fault.name, "planned_at": fault.at, "at": at, "took": took, "what": what}
        )
        log(f"soak: +{at:5.0f}s {fault.name}: {what}")


#: Longest the fault clock waits for every task to be in its wait.
START_TIMEOUT = 240.0


def _all_waiting(ctx: AirflowProcesses, soak: Soak) -> int:
    """Until every task has started its wait (its JobSet or anchor exists: Airflow says
    "running" well before a loaded worker reaches ``execute``), so the faults strike inside
    the runs. How many had (all of them, unless Airflow took too long)."""
    deadline = time.time() + START_TIMEOUT
    while True:
        created = {seen.task_id for seen in list(soak.seen.values())}
        try:
            done = {ti["task_id"] for ti in _task_instances(ctx) if ti["state"] in _ENDED}
        except OSError:  # the API server starting
            done = set()
        waiting = len(created | done)
        if waiting >= len(soak.plan.tasks) or time.time() > deadline:
            time.sleep(3)  # the waits open their watches
            return waiting
        time.sleep(2)


_ENDED = ("success", "failed", "up_for_retry", "upstream_failed")


def _wait_for_the_run(ctx: AirflowProcesses, soak: Soak) -> None:
    deadline = soak.started + soak.plan.window + GRACE
    while time.time() < deadline:
        soak.run_state = ctx.api("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{RUN_ID}")["state"]
        if soak.run_state in ("success", "failed"):
            break
        time.sleep(5)
    soak.finished = time.time()
    soak.tis = _task_instances(ctx)


def _settled(dc: DevCluster, namespace: str) -> dict[str, list[str]]:
    """What is left once the owners deleted what they created (the garbage collector gets a
    minute for the pods of deleted Jobs)."""
    settle = time.time() + 60
    while True:
        left = _leftovers(dc, namespace)
        if not any(left.values()) or time.time() > settle:
            return left
        time.sleep(2)


def scan_for_credentials(airflow_home: Path, state_dir: Path) -> list[str]:
    """Files of the Airflow logs (task logs, scheduler, triggerer, ...) that hold a token the
    token webhook issued, or the devcluster's keys (see tests/cluster/logscan.py)."""
    from tests.cluster import logscan

    return logscan.leaks([airflow_home], logscan.secrets_of(state_dir))


# ---------------------------------------------------------------------- the figures


def summarise(soak: Soak) -> dict[str, Any]:
    """The counts of a soak (plain data: the results file and the table)."""
    plan = soak.plan
    by_task = {t.task_id: t for t in plan.tasks}
    tis = {ti["task_id"]: ti for ti in soak.tis}
    uids: dict[str, set[str]] = {}
    for seen in soak.seen.values():
        uids.setdefault(seen.task_id, set()).add(seen.uid)

    rows = []
    wrong, missed, late = [], [], []
    for task in plan.tasks:
        ti = tis.get(task.task_id, {})
        state = ti.get("state")
        seen = [s for s in soak.seen.values() if s.task_id == task.task_id]
        jobset_said = next((s.terminal for s in seen if s.terminal), None)
        deserved = task.behaviour.deserved
        # The JobSet's own verdict must agree with the plan, and the task with both.
        cluster_deserved = {"Completed": "success", "Failed": "failed"}.get(jobset_said or "")
        if cluster_deserved is not None and cluster_deserved != deserved:
            wrong.append(f"{task.task_id}: the JobSet ended {jobset_said}, planned {deserved}")
        if state != deserved:
            if state in ("success", "failed"):
                wrong.append(f"{task.task_id} ({task.kind}): {state}, deserved {deserved}")
            else:
                missed.append(f"{task.task_id} ({task.kind}): still {state}")
        lateness = None
        terminal_at = max((s.terminal_at for s in seen if s.terminal_at), default=None)
        ended = _iso(ti.get("end_date"))
        if terminal_at is not None and ended is not None:
            lateness = round(ended - terminal_at, 1)
            late.append(lateness)
        rows.append(
            {
                "task_id": task.task_id,
                "kind": task.kind,
                "deserved": deserved,
                "state": state,
                "tries": ti.get("try_number"),
                "jobset": jobset_said,
                "jobsets_created": len(uids.get(task.task_id, ())),
                "late_seconds": lateness,
            }
        )
    duplicates = {t: len(u) for t, u in uids.items() if len(u) > 1}
    triggerer = soak.users.get("triggerer")
    deleted_by_triggerer = [
        e
        for e in soak.audit
        if e.get("user", {}).get("username") == triggerer
        and e.get("verb") == "delete"
        and (e.get("objectRef") or {}).get("resource") in ("jobsets", "configmaps")
    ]
    task_hours = 0.0
    for ti in soak.tis:
        start, end = _iso(ti.get("start_date")), _iso(ti.get("end_date"))
        if start is not None:
            task_hours += ((end or soak.finished) - start) / 3600
    requests = [
        e for e in soak.audit if soak.started <= (_iso(e.get("requestReceivedTimestamp")) or 0)
    ]
    by_verb: dict[str, int] = {}
    for event in requests:
        by_verb[event.get("verb", "?")] = by_verb.get(event.get("verb", "?"), 0) + 1
    watches = by_verb.get("watch", 0)
    refused = sum(1 for e in requests if (e.get("responseStatus") or {}).get("code") == 401)
    late.sort()
    return {
        "seed": plan.seed,
        "tasks": len(plan.tasks),
        "window_seconds": plan.window,
        "duration_seconds": round(soak.finished - soak.started, 1),
        "dag_run_state": soak.run_state,
        "deserved_state": len(plan.tasks) - len(wrong) - len(missed),
        "wrong_state": wrong,
        "missed_terminal": missed,
        "late_seconds": {
            "max": late[-1] if late else None,
            "p50": late[len(late) // 2] if late else None,
            "p95": late[min(len(late) - 1, int(len(late) * 0.95))] if late else None,
        },
        "duplicate_jobsets": duplicates,
        "orphans": {k: v for k, v in soak.leftovers.items() if v},
        "deleted_by_triggerer": [
            f"{(e.get('objectRef') or {}).get('resource')}/{(e.get('objectRef') or {}).get('name')}"
            for e in deleted_by_triggerer
        ],
        "task_hours": round(task_hours, 3),
        "api_requests": len(requests),
        "api_requests_per_task_hour": round(len(requests) / task_hours) if task_hours else None,
        "requests_by_verb": dict(sorted(by_verb.items())),
        "watch_reconnects": watches,
        "watch_reconnects_per_task_hour": round(watches / task_hours) if task_hours else None,
        "unauthorized_answers": refused,
        "proxy": soak.proxy,
        "faults": soak.faults,
        "credential_leaks": soak.leaks,
        "by_task": rows,
        "kinds": sorted({t.kind for t in by_task.values()}),
    }


def failures(summary: dict[str, Any]) -> list[str]:
    """What a soak must never show (empty: it passed)."""
    found = []
    if summary["tasks"] < 1 or summary["deserved_state"] != summary["tasks"]:
        found += summary["wrong_state"] + summary["missed_terminal"]
    if summary["duplicate_jobsets"]:
        found.append(f"duplicate JobSets: {summary['duplicate_jobsets']}")
    if summary["orphans"]:
        found.append(f"orphans: {summary['orphans']}")
    if summary["deleted_by_triggerer"]:
        found.append(f"deleted by the triggerer: {summary['deleted_by_triggerer']}")
    if summary["credential_leaks"]:
        found.append(f"credentials in logs: {summary['credential_leaks']}")
    found += [f"fault {f['name']}: {f['what']}" for f in summary["faults"] if "FAILED" in f["what"]]
    return found


def _iso(text: str | None) -> float | None:
    if not text:
        return None
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def render(summary: dict[str, Any]) -> str:
    """The summary table."""
    late = summary["late_seconds"]
    lines = [
        f"soak seed {summary['seed']}: {summary['tasks']} tasks, "
        f"{summary['duration_seconds']:.0f}s, DAG run {summary['dag_run_state']}",
        "",
        f"{'tasks in the state their JobSet deserved':<48} "
        f"{summary['deserved_state']} / {summary['tasks']}",
        f"{'missed terminal states':<48} {len(summary['missed_terminal'])}",
        f"{'late terminal states (s): p50 / p95 / max':<48} "
        f"{late['p50']} / {late['p95']} / {late['max']}",
        f"{'duplicate JobSets':<48} {len(summary['duplicate_jobsets'])}",
        f"{'orphans (JobSets, anchors, Jobs, pods, Services)':<48} "
        f"{sum(len(v) for v in summary['orphans'].values())}",
        f"{'JobSets deleted by a triggerer restart':<48} {len(summary['deleted_by_triggerer'])}",
        f"{'API requests per task-hour':<48} {summary['api_requests_per_task_hour']}"
        f" ({summary['api_requests']} in {summary['task_hours']} task-hours)",
        f"{'watch reconnects per task-hour':<48} {summary['watch_reconnects_per_task_hour']}"
        f" ({summary['watch_reconnects']})",
        f"{'401 answers (expired tokens, each refreshed)':<48} {summary['unauthorized_answers']}",
        f"{'credentials found in logs':<48} {len(summary['credential_leaks'])}",
        "",
        "faults:",
        *(f"  +{f['at']:5.0f}s {f['name']:<26} {f['what']}" for f in summary["faults"]),
        "",
        f"{'kind':<40} {'tasks':>5} {'deserved':>9} {'late max (s)':>13}",
    ]
    kinds: dict[str, list[dict[str, Any]]] = {}
    for row in summary["by_task"]:
        kinds.setdefault(row["kind"], []).append(row)
    for kind, rows in sorted(kinds.items()):
        ok = sum(1 for r in rows if r["state"] == r["deserved"])
        lates = [r["late_seconds"] for r in rows if r["late_seconds"] is not None]
        lines.append(f"{kind:<40} {len(rows):>5} {ok:>9} {max(lates) if lates else '-':>13}")
    problems = failures(summary)
    lines += ["", "PASSED" if not problems else "FAILED:", *(f"  {p}" for p in problems)]
    return "\n".join(lines)
