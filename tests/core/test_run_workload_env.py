"""The workload's variables reach the child Jobs on both backends (the devcluster), and
``inject_env=False`` leaves the submitted objects exactly as written."""

from __future__ import annotations

import time
from typing import Any

import pytest

from jobset_core import labels
from jobset_core.client import Client, ClientSettings
from jobset_core.lifecycle import Lifecycle, RunRequest
from jobset_core.models import JobSet
from jobset_core.observe import Observer
from jobset_core.workload import WORKLOAD_ENV

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

NAMES = [name for name, _ in WORKLOAD_ENV]


def _jobset(name: str) -> JobSet:
    container = {"name": "main", "image": "busybox", "env": [{"name": "MINE", "value": "1"}]}
    pod = {
        "metadata": {"annotations": {"devcluster/never-finish": "true"}},
        "spec": {"restartPolicy": "Never", "containers": [container]},
    }
    return JobSet.model_validate(
        {
            "metadata": {"name": name},
            "spec": {
                "replicatedJobs": [
                    {"name": "w", "replicas": 2, "template": {"spec": {"template": pod}}}
                ]
            },
        }
    )


def _jobs(devcluster: Any, namespace: str, name: str, want: int) -> list[Any]:
    selector = f"{labels.JOBSET_NAME}={name}"
    ends = time.monotonic() + 60
    while True:
        jobs = devcluster.batch.list_namespaced_job(namespace, label_selector=selector).items
        if len(jobs) >= want or time.monotonic() > ends:
            return list(jobs)
        time.sleep(0.5)


@pytest.mark.nojobset(backend="native")
@pytest.mark.parametrize("backend", ["controller", "native"])
@pytest.mark.parametrize("inject", [True, False], ids=["inject", "no-inject"])
async def test_the_child_jobs_carry_the_variables(
    backend: str, inject: bool, devcluster: Any, cluster_namespace: str
) -> None:
    name = f"env-{backend[0]}-{'y' if inject else 'n'}"
    async with Client(ClientSettings(kubeconfig_path=str(devcluster.kubeconfig))) as client:
        observer = Observer(client, scope="run")
        try:
            run = Lifecycle(observer)
            request = RunRequest(
                jobset=_jobset(name),
                namespace=cluster_namespace,
                backend=backend,  # type: ignore[arg-type]
                inject_env=inject,
            )
            submission = (await run.start(request)).submission
            jobs = _jobs(devcluster, cluster_namespace, name, 2)
            assert len(jobs) == 2
            for job in jobs:
                (container,) = job.spec.template.spec.containers
                names = [e.name for e in container.env or []]
                assert names == ([*NAMES, "MINE"] if inject else ["MINE"]), names
                if inject:
                    refs = {e.name: e.value_from.field_ref.field_path for e in container.env[:5]}
                    assert refs == dict(WORKLOAD_ENV)
            await run.runs.delete(submission.handle, wait=True, timeout=60)
        finally:
            await observer.aclose()
