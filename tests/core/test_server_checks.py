"""The target cluster as the oracle: before the first create, the run's objects are dry-run on
the devcluster as they will be created (the JobSet or the native anchor and Service, a child
Job and a pod per replicated job), in a namespace that enforces Pod Security ``restricted``,
a ResourceQuota and a LimitRange. Every refusal is an error before anything exists, on the
JobSet's field path, with the server's words and the admission plugin; nothing is created.

No offline check could know these namespaces' rules: each case below passes ``jobsetctl
validate`` offline (asserted)."""

from __future__ import annotations

import copy
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobset_core import labels
from jobset_core.errors import SpecError
from jobset_core.lifecycle import ClientSettings, Reporter, RunRequest, session
from jobset_core.models import load_jobset
from jobset_core.outcome import Progress
from jobset_core.validation import validate
from tests.cluster.bodies import jobset, replicated_job

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

#: A container Pod Security "restricted" admits.
RESTRICTED = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "runAsUser": 1000,
    "seccompProfile": {"type": "RuntimeDefault"},
}
POD = "spec.replicatedJobs[{i}].template.spec.template"


def guarded(devcluster: Any, namespace: str) -> None:
    """Pod Security restricted, a memory quota of 1Gi, at most 1 CPU a container."""
    devcluster.core.patch_namespace(
        namespace,
        {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}},
    )
    devcluster.core.create_namespaced_resource_quota(
        namespace,
        {"metadata": {"name": "compute"}, "spec": {"hard": {"requests.memory": "1Gi"}}},
    )
    devcluster.core.create_namespaced_limit_range(
        namespace,
        {
            "metadata": {"name": "limits"},
            "spec": {
                "limits": [
                    {
                        "type": "Container",
                        "max": {"cpu": "1"},
                        "default": {"cpu": "500m", "memory": "64Mi"},
                        "defaultRequest": {"cpu": "100m", "memory": "64Mi"},
                    }
                ]
            },
        },
    )


@pytest.fixture
def guarded_namespace(devcluster: Any, cluster_namespace: str) -> str:
    guarded(devcluster, cluster_namespace)
    return cluster_namespace


def good(name: str) -> dict[str, Any]:
    """Two replicated jobs whose pods every rule of the guarded namespace admits."""
    body = jobset(name, replicated_job("leader"), replicated_job("workers", replicas=2))
    for rjob in body["spec"]["replicatedJobs"]:
        container = rjob["template"]["spec"]["template"]["spec"]["containers"][0]
        container["securityContext"] = copy.deepcopy(RESTRICTED)
    return body


def _container(body: dict[str, Any], index: int = 1) -> dict[str, Any]:
    pod = body["spec"]["replicatedJobs"][index]["template"]["spec"]["template"]["spec"]
    return pod["containers"][0]  # type: ignore[no-any-return]


def privileged(body: dict[str, Any]) -> None:
    _container(body)["securityContext"] = {"privileged": True}


def over_the_limit(body: dict[str, Any]) -> None:
    _container(body)["resources"] = {"limits": {"cpu": "2"}}


def over_the_quota(body: dict[str, Any]) -> None:
    _container(body)["resources"] = {"requests": {"memory": "2Gi"}, "limits": {"memory": "2Gi"}}


def missing_account(body: dict[str, Any]) -> None:
    pod = body["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
    pod["serviceAccountName"] = "nobody-here"


#: (case, how the good JobSet is spoiled, the plugin the refusal names)
CASES: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("pod-security", privileged, 'PodSecurity "restricted:latest"'),
    ("limit-range", over_the_limit, "LimitRange"),
    ("quota", over_the_quota, "ResourceQuota compute"),
    ("service-account", missing_account, "ServiceAccount"),
]


def spoiled(case: str, spoil: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    body = good(f"sc-{case}")
    spoil(body)
    assert not validate(load_jobset(body)), "the offline checks cannot know this namespace"
    return body


def settings(devcluster: Any) -> ClientSettings:
    return ClientSettings(kubeconfig_path=str(devcluster.kubeconfig))


def nothing_exists(devcluster: Any, namespace: str) -> None:
    jobsets = devcluster.custom.list_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", namespace, "jobsets"
    )["items"]
    jobs = devcluster.batch.list_namespaced_job(namespace).items
    anchors = devcluster.core.list_namespaced_config_map(
        namespace, label_selector=f"{labels.ANCHOR_LABEL}={labels.ANCHOR_VALUE}"
    ).items
    services = devcluster.core.list_namespaced_service(namespace).items
    assert not (jobsets or jobs or anchors or services), (jobsets, jobs, anchors, services)


@pytest.mark.parametrize("backend", ["controller", "native"])
@pytest.mark.parametrize("refusal", CASES, ids=[c[0] for c in CASES])
async def test_a_refusal_of_the_namespace_is_an_error_before_anything_exists(
    devcluster: Any,
    guarded_namespace: str,
    refusal: tuple[str, Callable[[dict[str, Any]], None], str],
    backend: str,
) -> None:
    case, spoil, plugin = refusal
    body = spoiled(case, spoil)
    request = RunRequest(
        jobset=load_jobset(body), source="train.yaml", namespace=guarded_namespace, backend=backend
    )
    async with session(settings(devcluster)) as lifecycle:
        with pytest.raises(SpecError) as caught:
            await lifecycle.start(request)
    error = caught.value
    assert error.source == "train.yaml"
    assert [p.path for p in error.problems] == [POD.format(i=1)], error
    (problem,) = error.problems
    assert problem.message.startswith(f"{plugin} refuses the pods of replicated job 'workers'")
    nothing_exists(devcluster, guarded_namespace)


@pytest.mark.parametrize("backend", ["controller", "native"])
async def test_what_the_namespace_admits_is_created(
    devcluster: Any, guarded_namespace: str, backend: str
) -> None:
    request = RunRequest(
        jobset=load_jobset(good("sc-good")), namespace=guarded_namespace, backend=backend
    )
    async with session(settings(devcluster)) as lifecycle:
        checked = await lifecycle.check(request)
        started = await lifecycle.start(request)
        await lifecycle.runs.delete(started.handle, wait=True, timeout=60)
    assert not checked.problems and not checked.unchecked and not checked.exists
    # One run object, then a Job and a pod a replicated job (and the Service, natively).
    assert checked.requests == 1 + 2 * 2 + (backend == "native")
    assert started.submission.created


async def test_the_server_names_the_jobset_field_of_a_child_job_it_refuses(
    devcluster: Any, cluster_namespace: str
) -> None:
    """A rule of the pod spec the offline checks are told to skip (``validate=False``): the
    API server's cause on the Job's path is reported on the JobSet's."""
    body = jobset("sc-invalid", replicated_job("leader"), replicated_job("workers"))
    _container(body)["resources"] = {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}
    request = RunRequest(jobset=load_jobset(body), namespace=cluster_namespace)
    async with session(settings(devcluster), validate=False) as lifecycle:
        with pytest.raises(SpecError) as caught:
            await lifecycle.start(request)
    paths = {p.path for p in caught.value.problems}
    container = f"{POD.format(i=1)}.spec.containers[0]"
    assert paths == {f"{container}.resources.requests"}, caught.value
    assert all("the API server, on the" in p.message for p in caught.value.problems)
    nothing_exists(devcluster, cluster_namespace)


async def test_an_identity_that_may_not_create_pods_is_told_what_was_not_checked(
    devcluster: Any, guarded_namespace: str, tmp_path: Path
) -> None:
    """The worker Role grants no pod create: the pods are not judged (said once), the run
    goes on, and the Pod Security refusal then comes from the Job controller."""
    from tests.cluster.identities import least_privilege

    who = least_privilege(
        devcluster, guarded_namespace, tmp_path, "worker", ["jobset-airflow-worker-controller"]
    )
    heard: list[Progress] = []
    request = RunRequest(
        jobset=load_jobset(spoiled("unchecked", privileged)),
        namespace=guarded_namespace,
        backend="controller",
    )
    async with session(ClientSettings(kubeconfig_path=str(who.kubeconfig))) as lifecycle:
        started = await lifecycle.start(request, Reporter(progress=heard.append))
    assert started.submission.created
    notes = [p for p in heard if p.kind == "unchecked"]
    assert [p.message.split(" ")[0] for p in notes] == ["jobs", "pods"], heard
    devcluster.delete_jobset(guarded_namespace, started.handle.name)


async def test_the_optional_role_lets_the_identity_have_its_pods_checked(
    devcluster: Any, guarded_namespace: str, tmp_path: Path
) -> None:
    from tests.cluster.identities import least_privilege

    roles = ["jobset-airflow-worker-controller", "jobset-airflow-server-checks"]
    who = least_privilege(devcluster, guarded_namespace, tmp_path, "checked", roles)
    request = RunRequest(
        jobset=load_jobset(spoiled("checked", privileged)), namespace=guarded_namespace
    )
    async with session(ClientSettings(kubeconfig_path=str(who.kubeconfig))) as lifecycle:
        checked = await lifecycle.check(request)
        with pytest.raises(SpecError):
            await lifecycle.start(request)
    assert not checked.unchecked, checked
    assert [p.path for p in checked.problems] == [POD.format(i=1)]
    nothing_exists(devcluster, guarded_namespace)


async def test_an_existing_run_is_adopted_without_asking_again(
    devcluster: Any, guarded_namespace: str
) -> None:
    """A retried try meets its run: it was checked when it was created, and a policy that
    changed since is the wait's business (its pods are refused then)."""
    request = RunRequest(jobset=load_jobset(good("sc-again")), namespace=guarded_namespace)
    async with session(settings(devcluster)) as lifecycle:
        first = await lifecycle.start(request)
        spoiled_again = request.but(jobset=load_jobset(spoiled("again", privileged)))
        checked = await lifecycle.check(spoiled_again.but(identity=first.request.identity))
        await lifecycle.runs.delete(first.handle, wait=True, timeout=60)
    assert checked.exists and not checked.problems  # a refusal of the new spec is void


# ---------------------------------------------------------------------------- jobsetctl


@pytest.fixture
def spoiled_file(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(spoiled("cli", privileged)))
    yield path


def jobsetctl(devcluster: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "jobset_core.cli",
            *args,
            "--kubeconfig",
            str(devcluster.kubeconfig),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_jobsetctl_validate_server_reports_file_path_and_plugin(
    devcluster: Any, guarded_namespace: str, spoiled_file: Path
) -> None:
    offline = subprocess.run(
        [sys.executable, "-m", "jobset_core.cli", "validate", str(spoiled_file)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert offline.returncode == 0, offline
    done = jobsetctl(devcluster, "validate", "--server", "-n", guarded_namespace, str(spoiled_file))
    assert done.returncode == 1, done
    expected = f'{spoiled_file}: {POD.format(i=1)}: PodSecurity "restricted:latest" refuses'
    assert done.stdout.startswith(expected), done.stdout
    nothing_exists(devcluster, guarded_namespace)


def test_jobsetctl_run_exits_2_before_anything_exists(
    devcluster: Any, guarded_namespace: str, spoiled_file: Path
) -> None:
    done = jobsetctl(devcluster, "run", "-n", guarded_namespace, str(spoiled_file))
    assert done.returncode == 2, done
    assert f"{spoiled_file}: {POD.format(i=1)}: PodSecurity" in done.stderr, done.stderr
    nothing_exists(devcluster, guarded_namespace)
