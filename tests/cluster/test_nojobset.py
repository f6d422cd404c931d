"""A second devcluster without JobSet (``DEVCLUSTER_JOBSET=0``): the fixture starts it, its
API serves no ``jobset.x-k8s.io``, and plain batch Jobs still run on its kwok nodes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.cluster.pytest_devcluster import DEVCLUSTER_PY

pytestmark = pytest.mark.cluster


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
