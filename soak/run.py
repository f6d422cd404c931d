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

from soak import lateness
from soak.mix import LOCAL_QUEUE, PREEMPTER, Plan, dag_source, preempter_jobset
from tests.airflow._harness import AirflowProcesses, airflow_processes
from tests.cluster.faultproxy import FaultProxy
from tests.cluster.identities import Identity, bind_role, identity
from tests.cluster.localcluster import auth as devcluster_auth
from tests.cluster.pytest_devcluster import DevCluster
from tests.cluster.queues import own_queue

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
JOBSETS = ("jobset.x-k8s.io", "v1alpha2")
KUEUE = ("kueue.x-k8s.io", "v1beta2")
#: The task id the watcher gives the preempter's JobSet (it is no task of the DAG).
PREEMPTER_ID = "preempter"
#: A queued task admitted this many seconds after the queue opened waited for quota.
WAITED = 5.0
#: On a Workload: the UID of the JobSet it stands for.
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
#: The Roles the two identities are bound to: the shipped ones of both backends, and the
#: optional Kueue reader (so the queued tasks' logs say why they wait, and how often evicted).
ROLES = ("{side}-controller", "{side}-native", "kueue-reader")


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
    restarts: int = 0  # the most ``status.restarts`` seen


@dataclass
class Queued:
    """What the watcher saw of one Kueue Workload (a queued JobSet's, or the preempter's)."""

    name: str
    jobset_uid: str  # its label kueue.x-k8s.io/job-uid
    admitted_at: float | None = None  # the first admission (its condition's transition time)
    evictions: dict[str, int] = field(default_factory=dict)  # by reason, the most seen
    gone_at: float | None = None

    @property
    def preemptions(self) -> int:
        """Evictions to make room for another Workload."""
        return self.evictions.get("Preempted", 0)


@dataclass
class Soak:
    """Everything a soak recorded (plain data; :func:`summarise` reads it)."""

    plan: Plan
    namespace: str
    started: float = 0.0
    finished: float = 0.0
    faults: list[dict[str, Any]] = field(default_factory=list)
    seen: dict[str, Seen] = field(default_factory=dict)  # uid -> what the watcher saw
    workloads: dict[str, Queued] = field(default_factory=dict)  # Workload uid -> ...
    cluster_queue: str = ""
    tis: list[dict[str, Any]] = field(default_factory=list)
    leftovers: dict[str, list[str]] = field(default_factory=dict)
    audit: list[dict[str, Any]] = field(default_factory=list)
    users: dict[str, str] = field(default_factory=dict)  # role -> username
    proxy: dict[str, Any] = field(default_factory=dict)
    run_state: str = ""
    airflow_home: str = ""
    leaks: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------- the watcher


def _terminal(status: dict[str, Any]) -> tuple[str | None, float | None]:
    for condition in status.get("conditions") or []:
        if condition.get("type") in ("Completed", "Failed") and condition.get("status") == "True":
            return condition["type"], lateness.epoch(condition.get("lastTransitionTime"))
    return None, None


#: What the watcher follows: JobSets, native anchors, Kueue's Workloads.
FOLLOWED = ("jobset", "anchor", "workload")


def _source(
    dc: DevCluster, namespace: str, what: str
) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """The list function (and its arguments) of one followed kind."""
    if what == "jobset":
        return dc.custom.list_namespaced_custom_object, (*JOBSETS, namespace, "jobsets"), {}
    if what == "workload":
        return dc.custom.list_namespaced_custom_object, (*KUEUE, namespace, "workloads"), {}
    selector = {"label_selector": ANCHOR_SELECTOR}
    return dc.core.list_namespaced_config_map, (namespace,), selector


def _record(soak: Soak, what: str, obj: dict[str, Any], now: float, *, gone: bool) -> None:
    """Note one object as it stands (or as it stood when it was deleted)."""
    if what == "workload":
        _record_workload(soak, obj, now, gone=gone)
        return
    meta = obj.get("metadata") or {}
    uid = meta.get("uid") or ""
    labels = meta.get("labels") or {}
    if what == "anchor":
        status = json.loads((obj.get("data") or {}).get("status.json") or "{}")
    else:
        status = obj.get("status") or {}
    seen = soak.seen.get(uid)
    if seen is None:
        task_id = PREEMPTER_ID if labels.get(PREEMPTER) else labels.get(TASK_LABEL, "?")
        seen = soak.seen[uid] = Seen(what, task_id, uid, now)
    if seen.terminal is None:
        seen.terminal, seen.terminal_at = _terminal(status)
    restarts = status.get("restarts")
    if isinstance(restarts, int):
        seen.restarts = max(seen.restarts, restarts)
    if gone and seen.gone_at is None:
        seen.gone_at = now


def _record_workload(soak: Soak, obj: dict[str, Any], now: float, *, gone: bool) -> None:
    meta = obj.get("metadata") or {}
    queued = soak.workloads.get(meta.get("uid") or "")
    if queued is None:
        job = (meta.get("labels") or {}).get(JOB_UID_LABEL, "")
        queued = soak.workloads[meta.get("uid") or ""] = Queued(meta.get("name", ""), job)
    status = obj.get("status") or {}
    for item in (status.get("schedulingStats") or {}).get("evictions") or []:
        reason, count = str(item.get("reason")), int(item.get("count") or 0)
        queued.evictions[reason] = max(queued.evictions.get(reason, 0), count)
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Admitted" and condition.get("status") == "True":
            at = lateness.epoch(condition.get("lastTransitionTime"))
            if queued.admitted_at is None or (at is not None and at < queued.admitted_at):
                queued.admitted_at = at
    if gone and queued.gone_at is None:
        queued.gone_at = now


def _follow(dc: DevCluster, soak: Soak, what: str, lock: threading.Lock, stop: Any) -> None:
    """List, then watch from that list's version, one kind of the namespace until ``stop``:
    every change is seen, the last state of a deleted object too (a JobSet deleted within a
    second of its end still tells its terminal condition). An API server that is down is
    waited for; a watch too old to resume (410) starts over with a list."""
    from kubernetes import watch
    from kubernetes.client.exceptions import ApiException

    func, args, kwargs = _source(dc, soak.namespace, what)
    version: str | None = None
    while not stop.is_set():
        try:
            if version is None:
                answer = func(*args, **kwargs, _preload_content=False, _request_timeout=10)
                listed = json.loads(answer.data)
                now = time.time()
                with lock:
                    for item in listed.get("items") or []:
                        _record(soak, what, item, now, gone=False)
                version = listed["metadata"]["resourceVersion"]
            stream = watch.Watch().stream(
                func,
                *args,
                **kwargs,
                resource_version=version,
                timeout_seconds=5,
                _request_timeout=15,
            )
            for event in stream:
                obj = event["raw_object"]
                version = (obj.get("metadata") or {}).get("resourceVersion") or version
                with lock:
                    _record(soak, what, obj, time.time(), gone=event["type"] == "DELETED")
                if stop.is_set():
                    break
        except ApiException as error:
            if error.status == 410:
                version = None
            else:
                stop.wait(1.0)
        except Exception:  # the API server restarting: watch again in a second
            stop.wait(1.0)


@contextlib.contextmanager
def watching(dc: DevCluster, soak: Soak) -> Iterator[None]:
    """Record the namespace's JobSets, anchors and Workloads until the block ends: every
    change, through watches of our own (the admin client, straight to the API server)."""
    stop = threading.Event()
    lock = threading.Lock()
    threads = [
        threading.Thread(
            target=_follow, args=(dc, soak, what, lock, stop), name=f"soak-{what}", daemon=True
        )
        for what in FOLLOWED
    ]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)


# ---------------------------------------------------------------------- faults


def _devcluster(*args: str, state_dir: Path) -> None:
    env = dict(os.environ, DEVCLUSTER_STATE_DIR=str(state_dir))
    done = subprocess.run(
        [sys.executable, str(DEVCLUSTER), *args],
        env=env,
        check=False,
        timeout=300,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    if done.returncode:
        said = " | ".join(done.stderr.strip().splitlines()[-6:])
        raise RuntimeError(f"devcluster {' '.join(args)} exited {done.returncode}: {said}")


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


def _kill_a_worker(ctx: AirflowProcesses, soak: Soak, rand: random.Random) -> str:
    for _ in range(20):  # a worker-mode task may be between tries: look again
        workers = _worker_processes(ctx, soak)
        if workers:
            pid, task_id = rand.choice(workers)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            return f"task process of {task_id} (pid {pid}) SIGKILLed"
        time.sleep(1)
    raise RuntimeError("no worker-mode task was running to be killed")


def strike(
    name: str,
    ctx: AirflowProcesses,
    proxy: FaultProxy,
    soak: Soak,
    rand: random.Random,
    *,
    dc: DevCluster | None = None,
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
        return _kill_a_worker(ctx, soak, rand)
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
    if name == "preempt":
        if dc is None:
            raise ValueError("the fault preempt needs the devcluster")
        return preempt(dc, soak)
    raise ValueError(f"unknown fault {name!r}")


def _workloads(dc: DevCluster, namespace: str) -> list[dict[str, Any]]:
    found = dc.custom.list_namespaced_custom_object(
        *KUEUE, namespace, "workloads", _request_timeout=10
    )
    return list(found["items"])


def _condition(obj: dict[str, Any], ctype: str) -> bool:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == ctype:
            return bool(condition.get("status") == "True")
    return False


def _preempted(workload: dict[str, Any]) -> int:
    stats = (workload.get("status") or {}).get("schedulingStats") or {}
    evictions = stats.get("evictions") or []
    return sum(int(e.get("count") or 0) for e in evictions if e.get("reason") == "Preempted")


def preempt(dc: DevCluster, soak: Soak, *, patience: float = 20.0) -> str:
    """The fault ``preempt``: once every slot of the soak's ClusterQueue holds a queued task's
    JobSet, create the high-priority preempter (one slot's worth), and see Kueue evict one of
    them (the count of the Workload's ``schedulingStats``). Fails when the quota was not all
    held, or the preempter was admitted without a preemption."""
    namespace, slots = soak.namespace, soak.plan.queue_slots
    tasks = {s.uid: s.task_id for s in list(soak.seen.values())}
    deadline = time.time() + patience
    while True:
        held = [
            w
            for w in _workloads(dc, namespace)
            if _condition(w, "QuotaReserved") and not _condition(w, "Finished")
        ]
        if len(held) >= slots:
            break
        if time.time() > deadline:
            raise RuntimeError(f"{len(held)} of {slots} queue slots held: nothing to preempt")
        time.sleep(1)
    before = {w["metadata"]["uid"]: _preempted(w) for w in held}
    body = preempter_jobset()
    created = dc.create_jobset(namespace, body)
    mine = created["metadata"]["uid"]
    deadline = time.time() + patience
    admitted_at = None
    while time.time() < deadline:
        victims = [
            tasks.get((w["metadata"].get("labels") or {}).get(JOB_UID_LABEL, ""), "?")
            for w in _workloads(dc, namespace)
            if _preempted(w) > before.get(w["metadata"]["uid"], 0)
        ]
        if victims:
            return (
                f"{body['metadata']['name']} ({len(body['spec']['replicatedJobs'])} pods,"
                f" high priority) made Kueue evict the JobSet of {', '.join(sorted(victims))}"
            )
        ours = [
            w
            for w in _workloads(dc, namespace)
            if (w["metadata"].get("labels") or {}).get(JOB_UID_LABEL) == mine
        ]
        if ours and _condition(ours[0], "Admitted"):
            admitted_at = admitted_at or time.time()
            if time.time() - admitted_at > 5:
                raise RuntimeError("the preempter was admitted without a preemption")
        time.sleep(0.5)
    raise RuntimeError(f"no queued JobSet was preempted within {patience:.0f}s")


# ---------------------------------------------------------------------- the run


def _identities(dc: DevCluster, soak: Soak, folder: Path, proxy: FaultProxy) -> dict[str, Identity]:
    assert dc.state_dir is not None
    found = {}
    for side in ("worker", "triggerer"):
        who = identity(
            dc.state_dir, folder, soak.namespace, f"airflow-{side}", ttl=TOKEN_TTL, server=proxy.url
        )
        for role in ROLES:
            bind_role(dc, soak.namespace, f"jobset-airflow-{role.format(side=side)}", who)
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
        "workloads": [w["metadata"]["name"] for w in _workloads(dc, namespace)],
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
        with contextlib.ExitStack() as stack:
            if plan.queued:
                queue = stack.enter_context(own_queue(dc.custom, namespace, str(plan.queue_cpu)))
                assert queue == LOCAL_QUEUE, queue
                soak.cluster_queue = _hold(dc, namespace, queue)
            proxy = stack.enter_context(FaultProxy(dc.state_dir, seed=plan.seed))
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
                ctx.unpause(DAG_ID)
                with watching(dc, soak):
                    ctx.trigger(DAG_ID, RUN_ID)
                    waiting = _all_waiting(ctx, soak)
                    if soak.cluster_queue:  # the queue's clock is the faults'
                        _release(dc, soak.cluster_queue)
                    soak.started = time.time()
                    opened = (
                        f", ClusterQueue {soak.cluster_queue} opened" if soak.cluster_queue else ""
                    )
                    log(
                        f"soak: {waiting} of {len(plan.tasks)} tasks waiting in {namespace}{opened}"
                    )
                    _strike_all(ctx, proxy, soak, log, dc)
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


def _strike_all(
    ctx: AirflowProcesses, proxy: FaultProxy, soak: Soak, log: Any, dc: DevCluster
) -> None:
    """Each fault of the plan at its moment (a fault that could not strike is recorded as
    FAILED: a finding, never skipped)."""
    rand = random.Random(soak.plan.seed)
    for fault in soak.plan.faults:
        delay = soak.started + fault.at - time.time()
        if delay > 0:
            time.sleep(delay)
        t = time.time()
        try:
            what = strike(fault.name, ctx, proxy, soak, rand, dc=dc)
        except Exception as error:
            what = f"FAILED: {type(error).__name__}: {error}"
        at = round(t - soak.started, 1)
        took = round(time.time() - t, 1)
        soak.faults.append(
            {"name": fault.name, "planned_at": fault.at, "at": at, "took": took, "what": what}
        )
        log(f"soak: +{at:5.0f}s {fault.name}: {what}")


def _hold(dc: DevCluster, namespace: str, queue: str) -> str:
    """Stop the ClusterQueue of ``queue`` admitting (``stopPolicy: Hold``) until the fault
    clock starts: its timeline is then the plan's (the queued tasks are created over the
    seconds Airflow takes to start them all). Its name."""
    local = dc.custom.get_namespaced_custom_object(*KUEUE, namespace, "localqueues", queue)
    name = str(local["spec"]["clusterQueue"])
    dc.custom.patch_cluster_custom_object(
        *KUEUE, "clusterqueues", name, {"spec": {"stopPolicy": "Hold"}}
    )
    return name


def _release(dc: DevCluster, cluster_queue: str) -> None:
    dc.custom.patch_cluster_custom_object(
        *KUEUE, "clusterqueues", cluster_queue, {"spec": {"stopPolicy": "None"}}
    )


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
    """What is left once the owners deleted what they created (the garbage collector gets
    two minutes, as long as a start waits for a namesake being deleted)."""
    settle = time.time() + 120  # the garbage collector after an API-server restart: ~1 min
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
    for one in soak.seen.values():
        uids.setdefault(one.task_id, set()).add(one.uid)

    queue = _queue_rows(soak)
    rows = []
    wrong, missed, late = [], [], []
    splits: list[lateness.Split] = []  # whose the late seconds were (soak/lateness.py)
    outages = _outages(soak)
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
        # From the JobSet's own terminal condition: time in a queue is never lateness.
        late_by, shares = None, None
        terminal_at = max((s.terminal_at for s in seen if s.terminal_at), default=None)
        ended = lateness.epoch(ti.get("end_date"))
        if terminal_at is not None and ended is not None:
            late_by = round(ended - terminal_at, 1)
            late.append(late_by)
            shares = _late_split(
                soak, task.task_id, ti.get("try_number"), terminal_at, ended, outages=outages
            )
            if shares is not None:
                splits.append(shares)
        rows.append(
            {
                "task_id": task.task_id,
                "kind": task.kind,
                "deserved": deserved,
                "state": state,
                "tries": ti.get("try_number"),
                "jobset": jobset_said,
                "jobsets_created": len(uids.get(task.task_id, ())),
                "late_seconds": late_by,
                "late_ours": None if shares is None else shares.ours,
                "late_airflow": None if shares is None else shares.airflow,
                "late_cluster": None if shares is None else shares.cluster,
                "said_by": None if shares is None else shares.where,
                "restarts": max((s.restarts for s in seen), default=0),
                **queue.get(task.task_id, {}),
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
        start, end = lateness.epoch(ti.get("start_date")), lateness.epoch(ti.get("end_date"))
        if start is not None:
            task_hours += ((end or soak.finished) - start) / 3600
    requests = [
        e
        for e in soak.audit
        if soak.started <= (lateness.epoch(e.get("requestReceivedTimestamp")) or 0)
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
        "started_at": round(soak.started, 1),  # the faults' "at" count from here
        "duration_seconds": round(soak.finished - soak.started, 1),
        "dag_run_state": soak.run_state,
        "deserved_state": len(plan.tasks) - len(wrong) - len(missed),
        "wrong_state": wrong,
        "missed_terminal": missed,
        "late_seconds": _spread(late),
        "late_ours": _spread(sorted(x.ours for x in splits)),
        "late_airflow": _spread(sorted(x.airflow for x in splits)),
        "late_cluster": _spread(sorted(x.cluster for x in splits)),
        "late_unsplit": len(late) - len(splits),
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
        "queue": _queue_summary(soak, rows),
        "by_task": rows,
        "kinds": sorted({t.kind for t in by_task.values()}),
    }


def _spread(values: list[float]) -> dict[str, float | None]:
    """p50, p95 and max of sorted ``values``."""
    return {
        "max": values[-1] if values else None,
        "p50": values[len(values) // 2] if values else None,
        "p95": values[min(len(values) - 1, int(len(values) * 0.95))] if values else None,
    }


def _outages(soak: Soak) -> list[tuple[float, float]]:
    """When the API server was down (epoch seconds, from, to): each restart of it, from the
    stop until it answered again (the restart returns then)."""
    return [
        (soak.started + f["at"], soak.started + f["at"] + f["took"])
        for f in soak.faults
        if f["name"] == "apiserver-restart" and "FAILED" not in f["what"]
    ]


def _late_split(
    soak: Soak,
    task_id: str,
    try_number: Any,
    terminal_at: float,
    ended: float,
    *,
    outages: list[tuple[float, float]],
) -> lateness.Split | None:
    """A task's late seconds split at its last try's verdict line (``None``: no line)."""
    if not soak.airflow_home or not isinstance(try_number, int):
        return None
    folder = Path(soak.airflow_home) / "logs" / f"dag_id={DAG_ID}" / f"run_id={RUN_ID}"
    said = lateness.said_in(
        folder / f"task_id={task_id}", try_number, soak.namespace, f"soak-{task_id}-"
    )
    return lateness.split(terminal_at, ended, said, outages)


def _queue_rows(soak: Soak) -> dict[str, dict[str, Any]]:
    """Per queued task, what Kueue's Workloads of its JobSets said: how long it waited for
    its first admission after the queue opened, and how often it was preempted."""
    task_of = {s.uid: s.task_id for s in soak.seen.values()}
    rows: dict[str, dict[str, Any]] = {}
    for task in soak.plan.queued:
        mine = [w for w in soak.workloads.values() if task_of.get(w.jobset_uid) == task.task_id]
        admitted = min((w.admitted_at for w in mine if w.admitted_at is not None), default=None)
        rows[task.task_id] = {
            "queued_seconds": (
                round(max(0.0, admitted - soak.started), 1) if admitted is not None else None
            ),
            "preempted": sum(w.preemptions for w in mine),
            "evictions": sum(sum(w.evictions.values()) for w in mine),
        }
    return rows


def _queue_summary(soak: Soak, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The queue's counts: the queued tasks, those that waited for quota, the preemptions
    planned and seen (Kueue's own count on the Workloads), restarts of queued JobSets."""
    queued = [r for r in rows if "preempted" in r]
    waited = [
        r["task_id"]
        for r in queued
        if r["queued_seconds"] is not None and r["queued_seconds"] > WAITED
    ]
    return {
        "tasks": len(queued),
        "slots": soak.plan.queue_slots,
        "cpu": soak.plan.queue_cpu,
        "waited_for_quota": waited,
        "queued_seconds_max": max(
            (r["queued_seconds"] for r in queued if r["queued_seconds"] is not None), default=None
        ),
        "preemptions_planned": soak.plan.preemptions,
        "preemptions_seen": sum(r["preempted"] for r in queued),
        "preempted": [r["task_id"] for r in queued if r["preempted"]],
        "evictions": sum(r["evictions"] for r in queued),
        "restarted": {r["task_id"]: r["restarts"] for r in queued if r["restarts"]},
        "preempter": [
            s.terminal or "never ended" for s in soak.seen.values() if s.task_id == PREEMPTER_ID
        ],
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
    unsaid = [
        r["task_id"]
        for r in summary["by_task"]
        if r["late_seconds"] is not None and r["late_ours"] is None
    ]
    if unsaid:  # a user reads the verdict in the try's log; the split needs it too
        found.append(f"no verdict line in the last try's logs: {unsaid}")
    return found + _queue_failures(summary["queue"])


def _queue_failures(queue: dict[str, Any]) -> list[str]:
    found = []
    if queue["preemptions_seen"] < queue["preemptions_planned"]:
        found.append(
            f"planned {queue['preemptions_planned']} preemption(s), Kueue made "
            f"{queue['preemptions_seen']}"
        )
    if queue["tasks"] > queue["slots"] and len(queue["waited_for_quota"]) < (
        queue["tasks"] - queue["slots"]
    ):
        found.append(
            f"only {len(queue['waited_for_quota'])} of {queue['tasks']} queued tasks waited for"
            f" a ClusterQueue of {queue['slots']} slot(s)"
        )
    if queue["restarted"]:
        found.append(f"queued JobSets restarted (an eviction is no restart): {queue['restarted']}")
    return found


def render(summary: dict[str, Any]) -> str:
    """The summary table."""
    late, ours, theirs = summary["late_seconds"], summary["late_ours"], summary["late_airflow"]
    down = summary["late_cluster"]
    missing = summary["late_unsplit"]
    unsplit = f" ({missing} without a verdict line)" if missing else ""
    queue = summary["queue"]
    lines = [
        f"soak seed {summary['seed']}: {summary['tasks']} tasks, "
        f"{summary['duration_seconds']:.0f}s, DAG run {summary['dag_run_state']}",
        "",
        f"{'tasks in the state their JobSet deserved':<52} "
        f"{summary['deserved_state']} / {summary['tasks']}",
        f"{'missed terminal states':<52} {len(summary['missed_terminal'])}",
        f"{'late terminal states (s): p50 / p95 / max':<52} "
        f"{late['p50']} / {late['p95']} / {late['max']}",
        f"{'  of which ours (the waiter, the operator after it)':<52} "
        f"{ours['p50']} / {ours['p95']} / {ours['max']}",
        f"{'  of which Airflow (scheduling, resuming, ending)':<52} "
        f"{theirs['p50']} / {theirs['p95']} / {theirs['max']}{unsplit}",
        f"{'  of which the cluster (the API server down)':<52} "
        f"{down['p50']} / {down['p95']} / {down['max']}",
        f"{'duplicate JobSets':<52} {len(summary['duplicate_jobsets'])}",
        f"{'orphans (JobSets, anchors, children, Workloads)':<52} "
        f"{sum(len(v) for v in summary['orphans'].values())}",
        f"{'JobSets deleted by a triggerer restart':<52} {len(summary['deleted_by_triggerer'])}",
        f"{'API requests per task-hour':<52} {summary['api_requests_per_task_hour']}"
        f" ({summary['api_requests']} in {summary['task_hours']} task-hours)",
        f"{'watch reconnects per task-hour':<52} {summary['watch_reconnects_per_task_hour']}"
        f" ({summary['watch_reconnects']})",
        f"{'401 answers (expired tokens, each refreshed)':<52} {summary['unauthorized_answers']}",
        f"{'credentials found in logs':<52} {len(summary['credential_leaks'])}",
        f"{'queued tasks that waited for quota':<52} {len(queue['waited_for_quota'])}"
        f" of {queue['tasks']} (ClusterQueue of {queue['cpu']} CPUs, {queue['slots']} at once;"
        f" longest wait {queue['queued_seconds_max']}s)",
        f"{'preemptions planned / seen (Workload evictions)':<52} "
        f"{queue['preemptions_planned']} / {queue['preemptions_seen']}"
        f" ({', '.join(queue['preempted']) or 'none'})",
        f"{'restarts of queued JobSets':<52} {sum(queue['restarted'].values())}",
        "",
        "faults:",
        *(f"  +{f['at']:5.0f}s {f['name']:<26} {f['what']}" for f in summary["faults"]),
        "",
        f"{'kind':<40} {'tasks':>5} {'deserved':>9} {'late max (s)':>13} {'preempted':>10}",
    ]
    kinds: dict[str, list[dict[str, Any]]] = {}
    for row in summary["by_task"]:
        kinds.setdefault(row["kind"], []).append(row)
    for kind, rows in sorted(kinds.items()):
        ok = sum(1 for r in rows if r["state"] == r["deserved"])
        lates = [r["late_seconds"] for r in rows if r["late_seconds"] is not None]
        preempted = sum(r.get("preempted", 0) for r in rows)
        late_max = max(lates) if lates else "-"
        lines.append(f"{kind:<40} {len(rows):>5} {ok:>9} {late_max:>13} {preempted:>10}")
    problems = failures(summary)
    lines += ["", "PASSED" if not problems else "FAILED:", *(f"  {p}" for p in problems)]
    return "\n".join(lines)
