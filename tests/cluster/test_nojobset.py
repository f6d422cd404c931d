"""A second devcluster without JobSet (``DEVCLUSTER_JOBSET=0``): the fixture starts it, its
API serves no ``jobset.x-k8s.io``, plain batch Jobs still run on its kwok nodes, and ``auto``
chooses the native backend there. The native backend's own suite runs there too (tests marked
``nojobset``, e.g. ``tests/core/test_run_native.py``)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest

from tests.cluster.bodies import jobset, replicated_job
from tests.cluster.pytest_devcluster import DEVCLUSTER_PY

pytestmark = pytest.mark.cluster
ANCHOR = "jobset-core/anchor=native"


def test_a_cluster_without_jobset_runs_plain_jobs(cluster_without_jobset):
    dc = cluster_without_jobset
    env = dict(os.environ, DEVCLUSTER_STATE_DIR=str(dc.state_dir))
    status = subprocess.run(
        [sys.executable, str(DEVCLUSTER_PY), "status", "--json"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    report = json.loads(status.stdout)
    assert report["healthy"], report
    names = {c["name"] for c in report["components"]}
    assert not names & {"jobset", "jobset-webhooks", "kueue", "real-node"}, names
    assert "kwok" in names
    ns = dc.create_namespace("nojs")
    try:
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "plain"},
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "registry.invalid/worker:1"}],
                    }
                }
            },
        }
        dc.batch.create_namespaced_job(ns, job)
        dc.wait_for(
            lambda: dc.batch.read_namespaced_job("plain", ns).status.succeeded,
            timeout=60,
            desc="the Job to succeed",
        )
    finally:
        dc.delete_namespace(ns)


def test_auto_chooses_native_where_the_jobset_api_is_not_served(cluster_without_jobset, tmp_path):
    """``jobsetctl run`` without ``--backend`` (``auto``) runs the native backend there, and
    ``status`` and ``delete`` find the run without being told its backend."""
    from jobset_core import cli as jobsetctl

    dc = cluster_without_jobset
    notes = {"devcluster/run-seconds": "0.5", "devcluster/termination-message": '{"ok": 1}'}
    body = jobset("auto", replicated_job("w", replicas=2, annotations=notes))
    path = tmp_path / "auto.yaml"
    path.write_text(json.dumps(body))
    ns = dc.create_namespace("auto")

    def cli(*args: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        base = ["--kubeconfig", str(dc.kubeconfig), "-n", ns]
        code = jobsetctl.main([*args, *base], stdout=out, stderr=err, stdin=io.StringIO())
        return code, out.getvalue(), err.getvalue()

    try:
        code, out, err = cli("run", str(path), "--timeout", "90")
        assert code == 0, out + err
        code, out, err = cli("status", "auto")
        assert code == 0, err
        assert out.startswith("backend: native uid: ") and "Completed" in out, out
        anchors = dc.core.list_namespaced_config_map(ns, label_selector=ANCHOR).items
        assert [a.metadata.name for a in anchors] == ["auto"]
        jobs = dc.batch.list_namespaced_job(
            ns, label_selector="jobset.sigs.k8s.io/jobset-name=auto"
        )
        assert sorted(j.metadata.name for j in jobs.items) == ["auto-w-0", "auto-w-1"]
        assert [s.metadata.name for s in dc.core.list_namespaced_service(ns).items] == ["auto"]
        code, out, err = cli("delete", "auto", "--wait")
        assert code == 0, err
        assert dc.core.list_namespaced_config_map(ns, label_selector=ANCHOR).items == []
    finally:
        dc.delete_namespace(ns)
