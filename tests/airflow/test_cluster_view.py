"""The JobSet view end to end: a real Airflow (API server, scheduler, DAG processor,
triggerer) runs one DAG whose two JobSet tasks (one per backend) restart once and succeed; the
API server, reading the devcluster as a service account bound to nothing but the RBAC of
docs/ui.md, serves each task's picture to a user the auth manager lets in: every pod in its
cell with its phase, node and zone, the restart with the Job that failed, the success policy
that ended the run, the pods' log lines, and no environment value. A request without a valid
token, or by a user the auth manager keeps out of the DAG, gets no data. The DAG run's summary
lists both tasks. Then Debian's Chromium shows each task's JobSet tab and the run's JobSets
tab in the Airflow UI (screenshots kept), and nothing to a browser without a session."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.airflow._browser import browser
from tests.airflow._harness import AirflowProcesses, airflow_processes
from tests.airflow._view_auth import HIDDEN_DAG, OUTSIDER, OneDagHidden
from tests.cluster.localcluster import auth as devcluster_auth

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.airflow,
    pytest.mark.airflow_matrix,
    pytest.mark.airflow_min("3.1"),  # 3.0 has no plugin views (docs/ui.md)
    pytest.mark.timeout(900),
]

ROOT = Path(__file__).resolve().parents[2]
DAG_ID = HIDDEN_DAG
PASSWORDS = {"admin": "admin-password", OUTSIDER: "outsider-password"}
RUN_ID = "view_run"
CONN = "jobset_view"
SECRET = "s3cr3t-env-value"
LOG = "epoch 1 of training"

DAG = """
from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_provider_jobset.operators import JobSetOperator

pod = {
    "metadata": {"annotations": {
        "devcluster/run-seconds": "2",
        "devcluster/fail-until-attempt": "1",
        "devcluster/log": "%(log)s",
        "devcluster/termination-message": '{"loss": 0.1}',
    }},
    "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", "env": [
        {"name": "PLAIN", "value": "%(secret)s"},
        {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {
            "name": "absent", "key": "k", "optional": True}}},
    ]}]},
}
jobset = {
    "apiVersion": "jobset.x-k8s.io/v1alpha2",
    "kind": "JobSet",
    "metadata": {"name": "view"},
    "spec": {
        "failurePolicy": {"maxRestarts": 1},
        "replicatedJobs": [{"name": "w", "replicas": 2, "template": {"spec": {
            "backoffLimit": 0, "completions": 1, "parallelism": 1, "template": pod}}}],
    },
}

with DAG("%(dag)s", schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
         default_args={"retry_delay": timedelta(seconds=2)}):
    for backend in ("controller", "native"):
        JobSetOperator(task_id=f"train_{backend}", jobset=jobset, namespace="%(ns)s",
                       backend=backend, kubernetes_conn_id="%(conn)s", delete_policy="never")
"""


def documented_rbac() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The rules of the Role and of the ClusterRole docs/ui.md tells users to apply."""
    text = (ROOT / "docs" / "ui.md").read_text()
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if "kind: Role" in b]
    documents = {d["kind"]: d for d in yaml.safe_load_all(block)}
    return documents["Role"]["rules"], documents["ClusterRole"]["rules"]


@pytest.fixture
def airflow_env(
    kube_conn: str, cluster_namespace: str, devcluster: Any, tmp_path: Path
) -> Iterator[AirflowProcesses]:
    from kubernetes import client

    from tests.cluster.identities import bind_role, identity

    namespace = cluster_namespace
    rules, node_rules = documented_rbac()
    reader = identity(devcluster.state_dir, tmp_path, namespace, "airflow-api-server", ttl=60)
    bind_role(devcluster, namespace, "jobset-airflow-kueue-reader", reader, rules=rules)
    rbac = client.RbacAuthorizationV1Api(devcluster.api_client())
    nodes = f"jobset-airflow-view-nodes-{namespace}"
    rbac.create_cluster_role({"metadata": {"name": nodes}, "rules": node_rules})
    subject = {"kind": "ServiceAccount", "name": reader.account, "namespace": namespace}
    role_ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": nodes}
    rbac.create_cluster_role_binding(
        {"metadata": {"name": nodes}, "roleRef": role_ref, "subjects": [subject]}
    )
    admin = json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": kube_conn}})
    conn = f"AIRFLOW_CONN_{CONN.upper()}"
    source = DAG % {"log": LOG, "secret": SECRET, "dag": DAG_ID, "ns": namespace, "conn": CONN}
    passwords = tmp_path / "passwords.json"
    passwords.write_text(json.dumps(PASSWORDS))
    users = {
        "AIRFLOW__CORE__AUTH_MANAGER": f"{OneDagHidden.__module__}.{OneDagHidden.__name__}",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"admin:admin,{OUTSIDER}:viewer",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
    }
    try:
        with airflow_processes(
            {DAG_ID: source},
            extra_env={conn: admin, **users},  # the workers and the triggerer: as an admin
            process_env={"api-server": {conn: reader.connection()}},
        ) as ctx:
            ctx.login = ("admin", PASSWORDS["admin"])
            yield ctx
    finally:
        rbac.delete_cluster_role_binding(nodes)
        rbac.delete_cluster_role(nodes)


def get(ctx: AirflowProcesses, path: str, token: str | None, body: Any = None) -> tuple[int, bytes]:
    """One GET (with ``body``: POST) of the API server, with ``token`` (``None``: none); its
    status and body."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    if body is not None:
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(
        f"http://127.0.0.1:{ctx.port}{path}",
        headers=headers,
        data=None if body is None else json.dumps(body).encode(),
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, bytes(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def token_of(ctx: AirflowProcesses, user: str) -> str:
    """A JWT of ``user`` from the simple auth manager's login endpoint (once it answers)."""
    deadline = time.monotonic() + 120
    while True:
        try:
            return ctx.token_of(user, PASSWORDS[user])
        except OSError as error:  # not up yet
            assert time.monotonic() < deadline, (error, ctx.logs())
        time.sleep(1)


def screenshots(tmp_path: Path) -> Path:
    """Where the browser's screenshots go: ``$JOBSET_UI_SCREENSHOTS`` (e.g. to refresh the
    docs' pictures), else the test's temporary folder (kept with the run's logs)."""
    chosen = os.environ.get("JOBSET_UI_SCREENSHOTS")
    return Path(chosen) if chosen else tmp_path / "screenshots"


def test_the_view_shows_a_restarted_run_on_both_backends_to_its_readers_only(
    airflow_env: AirflowProcesses, cluster_namespace: str, devcluster: Any, tmp_path: Path
) -> None:
    ctx = airflow_env
    ctx.wait_parsed(DAG_ID)
    ctx.unpause(DAG_ID)
    ctx.trigger(DAG_ID, RUN_ID)
    state = ctx.wait_run(DAG_ID, RUN_ID, 420)
    tis = ctx.task_instances(DAG_ID, RUN_ID)
    assert state == "success", f"run is {state!r}: {tis}\n{ctx.logs()}"

    token, outsider = (token_of(ctx, user) for user in ("admin", OUTSIDER))
    # The API server loaded the provider's plugin: the tabs of task instances and DAG runs.
    plugins = json.loads(get(ctx, "/api/v2/plugins", token)[1])["plugins"]
    (plugin,) = [p for p in plugins if p["name"] == "jobset_view"]
    tabs = {t["destination"]: t["href"] for t in plugin["external_views"]}
    assert sorted(tabs) == ["dag_run", "task_instance"], tabs
    assert tabs["task_instance"].startswith("/jobset/ti?"), tabs
    assert tabs["dag_run"].startswith("/jobset/run?"), tabs
    status, page = get(ctx, "/jobset/ti?dag_id=x&run_id=y&task_id=z", None)
    assert status == 200 and b"<title>JobSet</title>" in page

    for backend in ("controller", "native"):
        path = f"/jobset/api/ti?dag_id={DAG_ID}&run_id={RUN_ID}&task_id=train_{backend}"
        status, body = get(ctx, path, token)
        assert status == 200, body[-2000:]
        assert SECRET.encode() not in body and b"secretKeyRef" not in body
        answer = json.loads(body)
        assert answer["found"], answer
        view = answer["picture"]
        where = f"{backend}: {json.dumps(view, indent=1)[:6000]}"
        js = view["jobset"]
        assert (js["backend"], js["namespace"], js["state"], js["restarts"]) == (
            backend,
            cluster_namespace,
            "Completed",
            1,
        ), where
        ((rj),) = view["grid"]
        assert rj["name"] == "w" and [j["index"] for j in rj["jobs"]] == [0, 1], where
        for job in rj["jobs"]:
            current = [p for p in job["pods"] if p["attempt"] == 1]
            assert len(current) == 1, where
            (pod,) = current
            assert pod["name"].startswith(f"{js['name']}-w-{job['index']}-"), where
            assert pod["phase"] == "Succeeded" and pod["exitCode"] == 0, where
            assert pod["node"] and pod["zone"], where
            assert LOG in (pod["log"] or ""), where
            assert pod["terminationMessage"] == '{"loss": 0.1}', where
        kinds = [e["kind"] for e in view["timeline"]]
        assert kinds[0] == "submitted" and "started" in kinds, where
        restarts = [e for e in view["timeline"] if e["kind"] == "restart"]
        assert len(restarts) == 1, where
        assert (restarts[0]["failedJob"] or "").startswith(f"{js['name']}-w-"), where
        (done,) = [e for e in view["timeline"] if e["kind"] == "completed"]
        assert done["decidedBy"] == "successPolicy", where
        policies = view["policies"]
        assert policies["success"]["met"] and policies["success"]["succeeded"] == {"w": 2}, where
        assert policies["failure"]["restarts"] == 1 == policies["failure"]["maxRestarts"], where
        assert set(view["notes"]) <= {"workload: forbidden"}, where
        objects = view["objects"]
        service = objects["service"]
        assert service["exists"] and service["clusterIP"] == "None", where
        current = sorted(j["name"] for j in objects["jobs"] if j["attempt"] == "1")
        assert current == [f"{js['name']}-w-0", f"{js['name']}-w-1"], where
        assert {j["state"] for j in objects["jobs"] if j["attempt"] == "1"} == {"Completed"}
        (rj_submitted,) = objects["submitted"]["spec"]["replicatedJobs"]
        (container,) = rj_submitted["template"]["spec"]["template"]["spec"]["containers"]
        env = container["env"]  # ours (JOBSET_NAME, ...) and the two of the DAG: names only
        assert {"PLAIN", "FROM_SECRET"} <= {e["name"] for e in env}, where
        assert all(set(e) == {"name", "value"} and e["value"] == "<not shown>" for e in env)

        # No valid token, or a user the auth manager keeps out of the DAG: no data (the
        # check comes before anything is read).
        for bad, expected in ((None, 401), ("not-a-token", 403), (outsider, 403)):
            status, body = get(ctx, path, bad)
            assert status == expected, (bad, status, body[:500])
            assert b"grid" not in body and b"picture" not in body

    # A refresh reads what the run's one watch (per API-server process) keeps: after the first
    # read, no list of the run's objects, whoever looks (the audit log of the API server's
    # identity).
    for backend in ("controller", "native"):
        path = f"/jobset/api/ti?dag_id={DAG_ID}&run_id={RUN_ID}&task_id=train_{backend}"
        time.sleep(3.5)  # past the answer shared for 3 s
        since = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        for viewer in (token, token):
            assert get(ctx, path, viewer)[0] == 200
        reader = {f"system:serviceaccount:{cluster_namespace}:airflow-api-server"}
        made = [
            (e["verb"], e["objectRef"].get("resource"))
            for e in devcluster_auth.audit_events(devcluster.state_dir, users=reader)
            if e.get("requestReceivedTimestamp", "") >= since
        ]
        listed = [m for m in made if m[0] == "list" and m[1] not in ("nodes",)]
        assert not listed, (backend, made)
        assert ("get", "pods") in made or ("get", "nodes") in made, (backend, made)

    # The DAG run's summary: both JobSet tasks, to its reader only.
    path = f"/jobset/api/run?dag_id={DAG_ID}&run_id={RUN_ID}"
    status, body = get(ctx, path, token)
    assert status == 200, body[-2000:]
    rows = {t["task_id"]: t for t in json.loads(body)["tasks"]}
    assert sorted(rows) == ["train_controller", "train_native"], rows
    for backend in ("controller", "native"):
        summary = rows[f"train_{backend}"]["summary"]
        js = summary["jobset"]
        assert (js["backend"], js["state"], js["restarts"]) == (backend, "Completed", 1), rows
        assert summary["phases"] == {"Succeeded": 2}, rows
    for bad, expected in ((None, 401), (outsider, 403)):
        status, body = get(ctx, path, bad)
        assert status == expected and b"summary" not in body, (bad, status, body[:500])

    # In a real browser, as the UI shows it: the task instance's JobSet tab.
    shots = screenshots(tmp_path)
    base = f"http://127.0.0.1:{ctx.port}"
    with browser() as chromium:
        chromium.get(f"{base}/jobset/ti")  # on the API server's site: its session cookie
        chromium.cookie("_token", token)
        for backend in ("controller", "native"):
            task = f"train_{backend}"
            chromium.tab(f"{base}/dags/{DAG_ID}/runs/{RUN_ID}/tasks/{task}/plugin/jobset", "JobSet")
            state = chromium.wait(
                "const s = document.querySelector('[data-testid=state]');"
                "return s && s.textContent;",
                60,
            )
            assert state == "Completed", backend
            cells = chromium.script(
                "return [...document.querySelectorAll('tr[data-cell]')].map(r => ["
                "r.dataset.cell, [...r.querySelectorAll('.pod:not(.old)')].map("
                "p => p.dataset.phase)]);"
            )
            assert cells == [["w/0", ["Succeeded"]], ["w/1", ["Succeeded"]]], cells
            restarts = chromium.script(
                "return document.querySelectorAll('tr[data-kind=restart]').length;"
            )
            assert restarts == 1, backend
            said = chromium.script(
                "return [document.querySelectorAll('tr[data-job]').length,"
                " document.querySelector('[data-testid=service]').textContent];"
            )
            assert said[0] >= 2 and "clusterIP None" in said[1], said
            chromium.script("document.querySelector('tr[data-cell=\"w/1\"] .pod').click();")
            shown = chromium.wait(
                "const l = document.querySelector('[data-testid=log]');return l && l.textContent;",
                10,
            )
            assert LOG in shown, shown
            chromium.frame(None)
            chromium.screenshot(shots / f"jobset-view-{backend}.png")
        # The DAG run's JobSets tab.
        chromium.tab(f"{base}/dags/{DAG_ID}/runs/{RUN_ID}/plugin/jobsets", "JobSets")
        shown = chromium.wait(
            "return document.body.dataset.loaded && [...document.querySelectorAll("
            "'tr[data-task]')].map(r => [r.dataset.task, r.querySelector('.badge')?.textContent]);",
            60,
        )
        assert shown == [["train_controller", "Completed"], ["train_native", "Completed"]], shown
        chromium.frame(None)
        chromium.screenshot(shots / "jobset-view-run.png")
        # A browser without a session: the data endpoint answers no data, the page says so.
        chromium.delete_cookie("_token")
        chromium.get(f"{base}/jobset/ti?dag_id={DAG_ID}&run_id={RUN_ID}&task_id=train_native")
        said = chromium.wait(
            "return document.body.dataset.loaded && "
            "document.querySelector('[data-testid=error]').textContent;",
            30,
        )
        assert "you may not see this task instance" in said, said
        assert chromium.script("return document.querySelectorAll('.pod').length;") == 0
        chromium.screenshot(shots / "jobset-view-no-access.png")
