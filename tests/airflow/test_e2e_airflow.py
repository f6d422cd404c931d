"""End to end with real Airflow processes: scheduler, triggerer, API server and DAG processor
(LocalExecutor on SQLite) run a DAG whose deferrable JobSet task fails once (the JobSet
restarts), is retried, reattaches to the same JobSet in the triggerer and succeeds; the
downstream task reads the result from XCom. Bounded in time; every process is stopped."""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

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

with DAG("%s", schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
         default_args={"retry_delay": timedelta(seconds=2)}):
    train = JobSetOperator(task_id="train", jobset=jobset, namespace="%s", deferrable=True,
                           delete_policy="always")

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

pod = {
    "metadata": {"annotations": {"devcluster/never-finish": "true"}},
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
    JobSetOperator(task_id="hold", jobset=jobset, namespace="%s", deferrable=True, retries=0)
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def airflow_env(kube_conn: str, cluster_namespace: str) -> Iterator[dict[str, Any]]:
    home = Path(tempfile.mkdtemp(prefix="jobset-e2e-airflow-"))
    (home / "dags").mkdir()
    (home / "dags" / f"{DAG_ID}.py").write_text(DAG % (DAG_ID, cluster_namespace))
    (home / "dags" / "e2e_kill.py").write_text(KILL_DAG % cluster_namespace)
    port = _free_port()
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "2",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(16),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
    }
    env.pop("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", None)
    airflow = [sys.executable, "-m", "airflow"]
    subprocess.run(
        [*airflow, "db", "migrate"], env=env, check=True, capture_output=True, timeout=300
    )
    procs: list[subprocess.Popen[bytes]] = []
    for command in (["api-server"], ["dag-processor"], ["scheduler"], ["triggerer"]):
        log = open(home / f"{command[0]}.log", "wb")  # noqa: SIM115 - closed with the process
        procs.append(
            subprocess.Popen(
                [*airflow, *command],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
    try:
        yield {
            "env": env,
            "home": home,
            "airflow": airflow,
            "procs": procs,
            "port": port,
            "namespace": cluster_namespace,
        }
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for proc in procs:
            try:
                proc.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


def _cli(ctx: dict[str, Any], *args: str) -> str:
    run = subprocess.run(
        [*ctx["airflow"], *args],
        env=ctx["env"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return run.stdout


def _json(text: str) -> Any:
    """The JSON document of a CLI answer (log lines may come before it)."""
    decoder = json.JSONDecoder()
    offset = 0
    for line in text.splitlines(keepends=True):
        if line.lstrip().startswith(("[", "{")):
            try:
                return decoder.raw_decode(text[offset + len(line) - len(line.lstrip()) :])[0]
            except ValueError:
                pass
        offset += len(line)
    raise AssertionError(f"no JSON in: {text[-2000:]}")


def _logs(home: Path) -> str:
    return "\n".join(
        f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in home.glob("*.log")
    )


def _wait_parsed(ctx: dict[str, Any], *dag_ids: str) -> None:
    deadline = time.monotonic() + 240
    while not all(d in _cli(ctx, "dags", "list", "-o", "plain") for d in dag_ids):
        assert time.monotonic() < deadline, "the DAG processor never parsed the DAGs\n" + _logs(
            ctx["home"]
        )
        time.sleep(3)


def _api(ctx: dict[str, Any], method: str, path: str, body: Any = None) -> Any:
    base = f"http://127.0.0.1:{ctx['port']}"
    with urllib.request.urlopen(f"{base}/auth/token", timeout=30) as answer:
        token = json.loads(answer.read())["access_token"]
    request = urllib.request.Request(
        base + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        return json.loads(answer.read())


def test_dag_lives_its_whole_life_with_a_retry(
    airflow_env: dict[str, Any], devcluster: Any
) -> None:
    ctx, home = airflow_env, airflow_env["home"]
    deadline = time.monotonic() + 240
    while DAG_ID not in _cli(ctx, "dags", "list", "-o", "plain"):
        assert time.monotonic() < deadline, "the DAG processor never parsed the DAG\n" + _logs(home)
        time.sleep(3)
    _cli(ctx, "dags", "unpause", DAG_ID)
    _cli(ctx, "dags", "trigger", DAG_ID, "--run-id", "e2e_run")
    deadline = time.monotonic() + 420
    state = ""
    while time.monotonic() < deadline:
        runs = _json(_cli(ctx, "dags", "list-runs", DAG_ID, "-o", "json"))
        state = next((r["state"] for r in runs if r["run_id"] == "e2e_run"), "")
        if state in ("success", "failed"):
            break
        time.sleep(5)
    tis = _json(_cli(ctx, "tasks", "states-for-dag-run", DAG_ID, "e2e_run", "-o", "json"))
    assert state == "success", f"run is {state!r}: {tis}\n{_logs(home)}"
    by_task = {t["task_id"]: t for t in tis}
    assert by_task["train"]["state"] == "success"
    assert by_task["check"]["state"] == "success"
    task_logs = home / "logs" / f"dag_id={DAG_ID}" / "run_id=e2e_run" / "task_id=train"
    names = sorted(p.name for p in task_logs.iterdir())
    tries = [n for n in names if re.fullmatch(r"attempt=\d+\.log", n)]
    assert tries == ["attempt=1.log", "attempt=2.log"], names
    assert any(".trigger." in n for n in names), f"no triggerer log: {names}"
    first = (task_logs / "attempt=1.log").read_text()
    second = (task_logs / "attempt=2.log").read_text()
    assert "JobSetRestarting" in first and "failed child Job" in first
    assert "reattached to JobSet" in second

    # A user marks the deferred task failed: the trigger's on_kill deletes the JobSet.
    _wait_parsed(ctx, "e2e_kill")
    _cli(ctx, "dags", "unpause", "e2e_kill")
    _cli(ctx, "dags", "trigger", "e2e_kill", "--run-id", "kill_run")
    namespace = ctx["namespace"]

    def deferred_with_jobset() -> bool:
        tis = _json(_cli(ctx, "tasks", "states-for-dag-run", "e2e_kill", "kill_run", "-o", "json"))
        jobsets = devcluster.custom.list_namespaced_custom_object(
            "jobset.x-k8s.io",
            "v1alpha2",
            namespace,
            "jobsets",
            label_selector="airflow-jobset/task-id=hold",
        )["items"]
        return bool(jobsets) and tis[0]["state"] == "deferred"

    devcluster.wait_for(deferred_with_jobset, 300, interval=3, desc="the deferred kill task")
    _api(
        ctx,
        "PATCH",
        "/api/v2/dags/e2e_kill/dagRuns/kill_run/taskInstances/hold",
        {"new_state": "failed"},
    )

    def everything_gone() -> bool:
        jobsets = devcluster.custom.list_namespaced_custom_object(
            "jobset.x-k8s.io",
            "v1alpha2",
            namespace,
            "jobsets",
            label_selector="airflow-jobset/task-id=hold",
        )["items"]
        pods = devcluster.core.list_namespaced_pod(namespace).items
        return not jobsets and not pods

    devcluster.wait_for(everything_gone, 240, interval=2, desc="the killed task's JobSet deleted")
    said = [
        p for p in home.rglob("*.log") if "task killed by a user" in p.read_text(errors="replace")
    ]
    assert said, "the trigger's on_kill did not report the deletion\n" + _logs(home)
