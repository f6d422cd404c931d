"""End to end with real Airflow processes: scheduler, triggerer, API server and DAG processor
(LocalExecutor on SQLite) run a DAG whose deferrable JobSet task fails once (the JobSet
restarts), is retried, reattaches to the same JobSet in the triggerer and succeeds; the
downstream task reads the result from XCom. A second DAG's task stays deferred on pods that
never finish: its log, read from the API server as the UI reads it, shows the pods' lines
(their containers start only once the task is deferred) while it is deferred and its JobSet
runs; then a user marks it failed and the trigger deletes the JobSet. Bounded in time; every
process is stopped.

The workers (the scheduler's) and the triggerer run as two service accounts bound to nothing
but the shipped controller-backend Roles of each, with tokens that expire every 30 s."""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.airflow._harness import AirflowProcesses, airflow_processes

pytestmark = [pytest.mark.cluster, pytest.mark.airflow, pytest.mark.timeout(900)]

DAG_ID = "e2e_jobset"
DAG = """
from datetime import datetime, timedelta

from airflow.sdk import DAG, task

from airflow_provider_jobset.operators import JobSetOperator

pod = {
    "metadata": {"annotations": {
        "devcluster/run-seconds": "2",
        "devcluster/fail-until-attempt": "1",
        "devcluster/log": "training...",
        "devcluster/termination-message": '{"accuracy": 0.95}',
    }},
    "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]},
}
jobset = {
    "apiVersion": "jobset.x-k8s.io/v1alpha2",
    "kind": "JobSet",
    "metadata": {"name": "e2e"},
    "spec": {
        "failurePolicy": {"maxRestarts": 1},
        "replicatedJobs": [{"name": "w", "replicas": 2, "template": {"spec": {
            "backoffLimit": 0, "completions": 1, "parallelism": 1, "template": pod}}}],
    },
}



def sockets_closed_before_exit(context):
    # Airflow's worker sees a task process end once it has closed its sockets and can be
    # reaped; when the sockets close first, it sleeps out [workers] min_heartbeat_interval
    # (5 s) before it looks again. On a real exit the gap is the kernel's last steps, and
    # it is lost often (one deferral in two here); here every exit of the task loses it.
    import atexit
    import os
    import time

    def close_then_linger():
        os.closerange(0, 65536)
        time.sleep(0.3)

    atexit.register(close_then_linger)


with DAG("%s", schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
         default_args={"retry_delay": timedelta(seconds=2)}):
    train = JobSetOperator(task_id="train", jobset=jobset, namespace="%s", deferrable=True,
                           delete_policy="always", on_execute_callback=sockets_closed_before_exit)

    @task
    def check(result):
        assert result == {"accuracy": 0.95}, result
        return "ok"

    check(train.output)
"""


KILL_DAG = """
from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_jobset.operators import JobSetOperator

# The containers start when the test patches start-seconds to 0 (with their log), once the
# task is deferred.
pod = {
    "metadata": {"annotations": {
        "devcluster/never-finish": "true",
        "devcluster/start-seconds": "3600",
    }},
    "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]},
}
jobset = {
    "apiVersion": "jobset.x-k8s.io/v1alpha2",
    "kind": "JobSet",
    "metadata": {"name": "hold"},
    "spec": {"replicatedJobs": [{"name": "w", "replicas": 2, "template": {"spec": {
        "backoffLimit": 0, "template": pod}}}]},
}

with DAG("e2e_kill", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    JobSetOperator(task_id="hold", jobset=jobset, namespace="%s", deferrable=True, retries=0,
                   log_pods="all")
"""


@pytest.fixture
def airflow_env(
    kube_conn: str, cluster_namespace: str, devcluster: Any, tmp_path: Path
) -> Iterator[AirflowProcesses]:
    from tests.cluster.identities import least_privilege

    dags = {DAG_ID: DAG % (DAG_ID, cluster_namespace), "e2e_kill": KILL_DAG % cluster_namespace}
    conn = "AIRFLOW_CONN_KUBERNETES_DEFAULT"
    process_env = {
        command: {
            conn: least_privilege(
                devcluster,
                cluster_namespace,
                tmp_path,
                f"airflow-{side}",
                [f"jobset-airflow-{side}-controller"],
                ttl=30,
            ).connection()
        }
        for command, side in (("scheduler", "worker"), ("triggerer", "triggerer"))
    }
    with airflow_processes(dags, process_env=process_env) as ctx:
        yield ctx


def test_dag_lives_its_whole_life_with_a_retry(
    airflow_env: AirflowProcesses, devcluster: Any, cluster_namespace: str
) -> None:
    ctx = airflow_env
    ctx.wait_parsed(DAG_ID)
    ctx.unpause(DAG_ID)
    ctx.trigger(DAG_ID, "e2e_run")
    state = ctx.wait_run(DAG_ID, "e2e_run", 420)
    by_task = ctx.task_instances(DAG_ID, "e2e_run")
    assert state == "success", f"run is {state!r}: {by_task}\n{ctx.logs()}"
    assert by_task["train"]["state"] == "success"
    assert by_task["check"]["state"] == "success"
    task_logs = ctx.task_logs(DAG_ID, "e2e_run", "train")
    names = sorted(p.name for p in task_logs.iterdir())
    tries = [n for n in names if re.fullmatch(r"attempt=\d+\.log", n)]
    assert tries == ["attempt=1.log", "attempt=2.log"], names
    assert any(".trigger." in n for n in names), f"no triggerer log: {names}"
    first = (task_logs / "attempt=1.log").read_text()
    second = (task_logs / "attempt=2.log").read_text()
    trigger = "".join(p.read_text() for p in task_logs.glob("attempt=1.log.trigger.*"))
    # The trigger saw the restart and named the failed child Job, and the resumed first try
    # raised it. Its run ended within seconds of the deferral, before Airflow's worker may
    # have seen the deferring process exit (it looks every [workers] min_heartbeat_interval
    # once the process has closed its sockets, which it does a moment before it ends): the
    # trigger held the event until then, so the scheduler never took that late exit for the
    # end of the resumed try (it failed one try in two, up for retry or failed, without it).
    assert "is restarting (restart 1)" in trigger and "failed child Job" in trigger, trigger
    assert "JobSetRestarting" in first and "failed child Job" in first, first
    assert "reattached to JobSet" in second
    assert not _scheduler_took_a_defer_exit_for_a_mismatch(ctx, "train"), ctx.logs()
    # The run ended seconds after each deferral, and the worker saw each deferring process
    # exit (5 s after the exit, as sockets_closed_before_exit makes every exit of the task)
    # before the trigger fired. (The second try defers only when it starts before the
    # JobSet's second attempt ends.)
    exits, fired = _defer_exits(ctx, "train"), _trigger_fired(task_logs)
    assert exits and len(exits) == len(fired), (exits, fired)
    assert all(e < f for e, f in zip(exits, fired, strict=True)), (exits, fired)

    # A task deferred on pods that never finish. Its log, as the API server serves it to a
    # user, shows the pods' lines while it is deferred: each pod's container starts, with a
    # line written for it, only once the task is deferred (the second once the first's line
    # is shown), so only a trigger that follows the pods' logs in the triggerer shows them.
    ctx.wait_parsed("e2e_kill")
    ctx.unpause("e2e_kill")
    ctx.trigger("e2e_kill", "kill_run")
    namespace = cluster_namespace
    hold = "/api/v2/dags/e2e_kill/dagRuns/kill_run/taskInstances/hold"

    def jobsets() -> list[dict[str, Any]]:
        return list(
            devcluster.custom.list_namespaced_custom_object(
                "jobset.x-k8s.io",
                "v1alpha2",
                namespace,
                "jobsets",
                label_selector="airflow-jobset/task-id=hold",
            )["items"]
        )

    def deferred_with_pods() -> tuple[str, list[Any]] | None:
        found = jobsets()
        if not found or ctx.api("GET", hold)["state"] != "deferred":
            return None
        name = found[0]["metadata"]["name"]
        selector = f"jobset.sigs.k8s.io/jobset-name={name}"
        pods = devcluster.core.list_namespaced_pod(namespace, label_selector=selector).items
        return (name, pods) if len(pods) == 2 else None

    name, pods = devcluster.wait_for(
        deferred_with_pods, 300, interval=1, desc="the deferred kill task and its two pods"
    )
    for pod in sorted(pods, key=lambda p: p.metadata.labels["jobset.sigs.k8s.io/job-index"]):
        pod_name = pod.metadata.name
        index = pod.metadata.labels["jobset.sigs.k8s.io/job-index"]
        text = f"worker {index} started after the task deferred"
        devcluster.core.patch_namespaced_pod(
            pod_name,
            namespace,
            {
                "metadata": {
                    "annotations": {"devcluster/log": text, "devcluster/start-seconds": "0"}
                }
            },
        )
        # The trigger names the pod a line came from (its JobSet, replicated job and index).
        assert pod_name.startswith(f"{name}-w-{index}-"), pod_name
        shown = f"[{pod_name}] {text}"
        events: list[str] = []

        def served(shown: str = shown, events: list[str] = events) -> bool:
            events[:] = [
                str(m.get("event")) for m in ctx.task_log("e2e_kill", "kill_run", "hold", 1)
            ]
            return shown in events

        deadline = time.monotonic() + 60
        while not served():
            assert time.monotonic() < deadline, (
                f"the deferred task's log never showed {shown!r}:\n"
                + "\n".join(events)
                + "\n"
                + ctx.logs()
            )
            time.sleep(1)
        # Read after the log: the task was deferred, its JobSet there and not finished.
        assert ctx.api("GET", hold)["state"] == "deferred"
        (jobset,) = jobsets()
        status = jobset.get("status") or {}
        ended = [
            c["type"]
            for c in status.get("conditions") or []
            if c["type"] in ("Completed", "Failed") and c["status"] == "True"
        ]
        assert not status.get("terminalState") and not ended, status

    # A user marks the deferred task failed: the trigger's on_kill deletes the JobSet.
    ctx.api("PATCH", hold, {"new_state": "failed"})

    def everything_gone() -> bool:
        return not jobsets() and not devcluster.core.list_namespaced_pod(namespace).items

    devcluster.wait_for(everything_gone, 240, interval=2, desc="the killed task's JobSet deleted")
    said = [
        p
        for p in ctx.home.rglob("*.log")
        if "task killed by a user" in p.read_text(errors="replace")
    ]
    assert said, "the trigger's on_kill did not report the deletion\n" + ctx.logs()


def _moment(stamp: str) -> dt.datetime:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def _defer_exits(ctx: AirflowProcesses, task_id: str) -> list[dt.datetime]:
    """When the worker saw each deferring process of the task exit (UTC, sorted)."""
    said = (ctx.home / "scheduler.log").read_text(errors="replace").splitlines()
    ids = {
        m.group(1)
        for line in said
        if f"task_id={task_id} " in line and f"dag_id={DAG_ID} " in line
        for m in [re.search(r"ti_id=([0-9a-f-]{36})", line)]
        if m
    }
    return sorted(
        _moment(line.split()[0])
        for line in said
        if "Workload finished" in line
        and "final_state=deferred" in line
        and any(f"workload_id={i}" in line for i in ids)
    )


def _trigger_fired(task_logs: Path) -> list[dt.datetime]:
    """When the task's triggers fired (UTC, sorted)."""
    return sorted(
        _moment(json.loads(line)["timestamp"])
        for path in task_logs.glob("attempt=*.log.trigger.*")
        for line in path.read_text().splitlines()
        if '"Trigger fired event"' in line
    )


def _scheduler_took_a_defer_exit_for_a_mismatch(ctx: AirflowProcesses, task_id: str) -> bool:
    """Whether the scheduler took a try's defer-exit for the end of its resumed try."""
    said = (ctx.home / "scheduler.log").read_text(errors="replace")
    mismatch = "finished with state success, but the task instance's state attribute is"
    return any(mismatch in line and f"{DAG_ID}.{task_id} " in line for line in said.splitlines())
