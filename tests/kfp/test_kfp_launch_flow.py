"""The launch step's flow on the devcluster: how :func:`kfp_components._launch.launch` reports
each ending of the core's lifecycle (created or adopted, the delete policy, failed pods' logs,
a refused delete or unreadable logs that must not hide how the step ended).

The refusals are real: the step runs as a service account whose Role lacks one verb.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobset_core.errors import JobSetFailed, WaitTimeout
from jobset_core.lifecycle import ClientSettings, Deadline, Lifecycle, RunRequest, session
from jobset_core.models import load_jobset
from kfp_components._identity import kfp_identity
from kfp_components._launch import LaunchResult, launch
from tests.kfp.conftest import make_jobset

pytestmark = [pytest.mark.cluster, pytest.mark.kfp]

OK = {"devcluster/run-seconds": "0.5", "devcluster/termination-message": '{"a": 1}'}
FAIL = {"devcluster/exit-code": "3", "devcluster/log": "Traceback ...\nCUDA error"}
FOREVER = {"devcluster/never-finish": "true"}


@asynccontextmanager
async def lifecycle(kubeconfig: Path) -> AsyncIterator[Lifecycle]:
    async with session(ClientSettings(kubeconfig_path=str(kubeconfig))) as made:
        yield made


def launch_request(*, timeout: float | None = None, **fields: Any) -> RunRequest:
    """The request ``launch_step`` builds (its defaults: delete on timeout, 30 log lines)."""
    fields.setdefault("delete_policy", "on_timeout")
    return RunRequest(deadline=Deadline(timeout=timeout), failed_pod_log_lines=30, **fields)


async def run_step(
    kubeconfig: Path, namespace: str, annotations: dict[str, str], **request: Any
) -> tuple[LaunchResult, list[str]]:
    said: list[str] = []
    identity = request.pop("identity", None) or kfp_identity(uuid.uuid4().hex, "train", "1")
    jobset = load_jobset(make_jobset("train", annotations=annotations))
    async with lifecycle(kubeconfig) as run:
        result = await launch(
            launch_request(jobset=jobset, namespace=namespace, identity=identity, **request),
            run,
            say=said.append,
        )
    return result, said


def jobsets(devcluster: Any, namespace: str) -> list[str]:
    items = devcluster.custom.list_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", namespace, "jobsets"
    )["items"]
    return [i["metadata"]["name"] for i in items if not i["metadata"].get("deletionTimestamp")]


async def test_completed_returns_the_outcome_under_the_derived_name(
    devcluster: Any, cluster_namespace: str
) -> None:
    identity = kfp_identity(uuid.uuid4().hex, "train", "1")
    result, said = await run_step(
        devcluster.kubeconfig, cluster_namespace, OK, identity=identity, backend="controller"
    )
    assert result.outcome.result == {"a": 1} and result.created and not result.deleted
    (name,) = jobsets(devcluster, cluster_namespace)
    assert name.startswith("train-") and said[0].startswith(f"JobSet {cluster_namespace}/{name}")
    assert said[0].endswith("created; uid " + result.outcome.uid + "; controller")
    again, said = await run_step(
        devcluster.kubeconfig, cluster_namespace, OK, identity=identity, backend="controller"
    )
    assert not again.created and "adopted (an earlier attempt created it)" in said[0]
    assert again.outcome.uid == result.outcome.uid


@pytest.mark.parametrize(("policy", "deleted"), [("on_timeout", False), ("on_success", True)])
async def test_completed_deleted_by_policy(
    policy: str, deleted: bool, devcluster: Any, cluster_namespace: str
) -> None:
    result, said = await run_step(
        devcluster.kubeconfig, cluster_namespace, OK, delete_policy=policy, backend="native"
    )
    assert result.deleted is deleted
    assert any(line.startswith("deleted JobSet") for line in said) is deleted


@pytest.mark.parametrize(("policy", "kept"), [("on_success", True), ("always", False)])
async def test_failed_raises_after_showing_the_pods_logs(
    policy: str, kept: bool, devcluster: Any, cluster_namespace: str
) -> None:
    said: list[str] = []
    with pytest.raises(JobSetFailed) as caught:
        try:
            await run_step(
                devcluster.kubeconfig,
                cluster_namespace,
                FAIL,
                delete_policy=policy,
                backend="controller",
            )
        except JobSetFailed as error:
            said.append(str(error))
            raise
    assert caught.value.verdict.outcome is not None
    assert caught.value.verdict.outcome.terminal_state == "Failed"
    assert bool(jobsets(devcluster, cluster_namespace)) is kept


async def test_timeout_deletes_unless_never(devcluster: Any, cluster_namespace: str) -> None:
    with pytest.raises(WaitTimeout):
        await run_step(
            devcluster.kubeconfig, cluster_namespace, FOREVER, timeout=2, backend="controller"
        )
    assert jobsets(devcluster, cluster_namespace) == []  # on_timeout (the default) deleted it
    with pytest.raises(WaitTimeout):
        await run_step(
            devcluster.kubeconfig,
            cluster_namespace,
            FOREVER,
            timeout=2,
            delete_policy="never",
            backend="controller",
        )
    assert len(jobsets(devcluster, cluster_namespace)) == 1


def _limited(devcluster: Any, namespace: str, tmp_path: Path, drop: tuple[str, str]) -> Path:
    """A kubeconfig for a service account with the shipped controller Role minus one
    ``(resource, verb)``."""
    from kubernetes import client

    root = Path(__file__).resolve().parents[2]
    role_file = root / "kfp_components" / "rbac" / "jobset-launcher-controller.yaml"
    role, binding = list(yaml.safe_load_all(role_file.read_text(encoding="utf-8")))
    for rule in role["rules"]:
        if drop[0] in rule["resources"]:
            rule["verbs"] = [v for v in rule["verbs"] if v != drop[1]]
    role["rules"] = [rule for rule in role["rules"] if rule["verbs"]]
    for document in (role, binding):
        document["metadata"]["namespace"] = namespace
    binding["subjects"][0]["namespace"] = namespace
    rbac = client.RbacAuthorizationV1Api(devcluster.api_client())
    rbac.create_namespaced_role(namespace, role)
    rbac.create_namespaced_role_binding(namespace, binding)
    account = binding["subjects"][0]["name"]
    devcluster.core.create_namespaced_service_account(namespace, {"metadata": {"name": account}})
    token = devcluster.core.create_namespaced_service_account_token(
        account, namespace, {"spec": {"expirationSeconds": 3600}}
    ).status.token
    config = yaml.safe_load(devcluster.kubeconfig.read_text(encoding="utf-8"))
    for user in config["users"]:
        user["user"] = {"token": token}
    path = tmp_path / "limited"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


async def test_unreadable_logs_do_not_hide_the_failure(
    devcluster: Any, cluster_namespace: str, tmp_path: Path
) -> None:
    kubeconfig = _limited(devcluster, cluster_namespace, tmp_path, ("pods/log", "get"))
    said: list[str] = []
    jobset = load_jobset(make_jobset("train", annotations=FAIL))
    async with lifecycle(kubeconfig) as run:
        with pytest.raises(JobSetFailed):
            await launch(
                launch_request(
                    jobset=jobset,
                    namespace=cluster_namespace,
                    identity=kfp_identity("r", "train", "1"),
                    backend="controller",
                ),
                run,
                say=said.append,
            )
    # In the API server's words: pods "..." is forbidden: User ... cannot get "pods/log" ...
    assert any(
        "the log cannot be read: " in line and "forbidden" in line.lower() for line in said
    ), said


async def test_a_refused_delete_does_not_hide_the_outcome(
    devcluster: Any, cluster_namespace: str, tmp_path: Path
) -> None:
    kubeconfig = _limited(devcluster, cluster_namespace, tmp_path, ("jobsets", "delete"))
    result, said = await run_step(
        kubeconfig, cluster_namespace, OK, delete_policy="always", backend="controller"
    )
    assert result.outcome.terminal_state == "Completed" and not result.deleted
    assert any(line.startswith("could not delete JobSet") for line in said), said
