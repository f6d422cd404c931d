"""The workload's variables (Downward API) and the builders' checkpoint directory (pure)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobset_core import cli, labels
from jobset_core.builders import (
    CHECKPOINT_ENV,
    CHECKPOINT_VOLUME,
    jax_multislice,
    leader_workers,
    pytorch_ddp,
)
from jobset_core.models import JobSet, dump_yaml, load_jobset
from jobset_core.render import render
from jobset_core.validation import validate
from jobset_core.workload import WORKLOAD_ENV, inject_workload_env
from tests.core.test_builders import PROBE, resolve_env, run_pods

NAMES = [name for name, _ in WORKLOAD_ENV]


def _jobset(*containers: dict[str, Any], init: list[dict[str, Any]] | None = None) -> JobSet:
    pod: dict[str, Any] = {"restartPolicy": "Never", "containers": list(containers)}
    if init is not None:
        pod["initContainers"] = init
    return load_jobset(
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": "wl"},
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "workers",
                        "replicas": 2,
                        "template": {
                            "spec": {
                                "completions": 2,
                                "parallelism": 2,
                                "completionMode": "Indexed",
                                "template": {"spec": pod},
                            }
                        },
                    },
                    {
                        "name": "driver",
                        "template": {"spec": {"template": {"spec": {"containers": [_c("drv")]}}}},
                    },
                ]
            },
        }
    )


def _c(name: str = "main", env: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "image": "busybox:1.36"}
    if env is not None:
        out["env"] = env
    return out


def _pod_specs(jobset: JobSet) -> list[dict[str, Any]]:
    return [rjob.template.spec["template"]["spec"] for rjob in jobset.replicated_jobs]


def _names(container: dict[str, Any]) -> list[str]:
    return [e["name"] for e in container.get("env") or []]


def test_every_container_of_every_replicated_job_gets_the_variables() -> None:
    jobset = _jobset(_c("a"), _c("b", env=[{"name": "X", "value": "1"}]), init=[_c("init")])
    injected = inject_workload_env(jobset)
    for pod in _pod_specs(injected):
        for container in [*pod.get("initContainers", []), *pod["containers"]]:
            assert _names(container)[: len(NAMES)] == NAMES, container["name"]
    workers = _pod_specs(injected)[0]
    assert _names(workers["containers"][1]) == [*NAMES, "X"]  # the user's after ours
    assert validate(injected) == []
    # A copy: the input is unchanged, and injecting again changes nothing.
    assert all("env" not in c for c in _pod_specs(jobset)[0]["containers"][:1])
    assert inject_workload_env(injected) is injected


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        pytest.param(
            [{"name": "JOBSET_POD_INDEX", "value": "7"}],
            [*NAMES],  # the user's entry stays first (in its place), the rest follow
            id="own-first",
        ),
        pytest.param(
            [{"name": "A", "value": "1"}, {"name": "JOBSET_RESTART_ATTEMPT", "value": "9"}],
            [n for n in NAMES if n != "JOBSET_RESTART_ATTEMPT"] + ["A", "JOBSET_RESTART_ATTEMPT"],
            id="own-later",
        ),
    ],
)
def test_a_variable_of_the_users_own_wins(env: list[dict[str, Any]], expected: list[str]) -> None:
    injected = inject_workload_env(_jobset(_c(env=env)))
    container = _pod_specs(injected)[0]["containers"][0]
    names = _names(container)
    assert sorted(names) == sorted(expected)
    assert len(names) == len(set(names)), "a variable defined twice"
    own = {e["name"]: e for e in env}
    for entry in container["env"]:
        if entry["name"] in own:
            assert entry == own[entry["name"]]  # the user's value, not the Downward API's


def test_the_variables_resolve_to_the_pods_place_and_attempt() -> None:
    """As the kubelet resolves them on a pod of the rendered Job (attempt 2, index 1)."""
    injected = inject_workload_env(_jobset(_c()))
    job = render(injected, "ns", 2).jobs[1]  # wl-workers-1
    template = job["spec"]["template"]
    meta = {
        "labels": template["metadata"]["labels"],
        "annotations": {**template["metadata"]["annotations"], labels.JOB_COMPLETION_INDEX: "1"},
    }
    env = resolve_env(template["spec"]["containers"][0], meta)
    assert env == {
        "JOBSET_NAME": "wl",
        "JOBSET_REPLICATED_JOB": "workers",
        "JOBSET_JOB_INDEX": "1",
        "JOBSET_POD_INDEX": "1",
        "JOBSET_RESTART_ATTEMPT": "2",
    }


def test_builders_inject_and_opt_out_changes_nothing_else() -> None:
    for build in (
        lambda **kw: leader_workers(
            "lw", "busybox", workers=2, leader_command=["a"], worker_command=["b"], **kw
        ),
        lambda **kw: pytorch_ddp("ddp", "torch", ["t.py"], nodes=2, procs_per_node=1, **kw),
        lambda **kw: jax_multislice(
            "jx", "jax", ["j.py"], slices=2, hosts_per_slice=2, topology_key="zone", **kw
        ),
    ):
        plain, injected = build(inject_env=False), build()
        assert inject_workload_env(plain) == injected
        for pod in _pod_specs(plain):
            for container in pod["containers"]:
                # Only the builders' own JOBSET_NAME (their addresses are made of it).
                assert set(_names(container)) & set(NAMES) <= {"JOBSET_NAME"}


def test_the_launched_program_gets_the_attempt_and_the_checkpoint_path(tmp_path: Path) -> None:
    jobset = pytorch_ddp(
        "ddp",
        "torch",
        PROBE,
        nodes=2,
        procs_per_node=1,
        launcher=False,
        checkpoint_dir="/ckpt",
        checkpoint_volume="train-ckpt",
    )
    reports = run_pods(jobset, tmp_path)
    assert [r["env"]["JOBSET_POD_INDEX"] for r in reports] == ["0", "1"]
    assert {r["env"]["JOBSET_RESTART_ATTEMPT"] for r in reports} == {"0"}
    assert {r["env"][CHECKPOINT_ENV] for r in reports} == {"/ckpt"}
    pod = _pod_specs(jobset)[0]
    assert pod["volumes"][-1] == {
        "name": CHECKPOINT_VOLUME,
        "persistentVolumeClaim": {"claimName": "train-ckpt"},
    }
    assert pod["containers"][0]["volumeMounts"][-1] == {
        "name": CHECKPOINT_VOLUME,
        "mountPath": "/ckpt",
    }


def test_a_claim_of_the_jobsets_own_is_a_volume_claim_policy() -> None:
    claim = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    jobset = leader_workers(
        "lw",
        "busybox",
        workers=1,
        leader_command=["a"],
        worker_command=["b"],
        checkpoint_dir="/ckpt",
        checkpoint_claim=claim,
    )
    assert validate(jobset) == []
    data = jobset.to_dict()
    assert data["spec"]["volumeClaimPolicies"] == [
        {"templates": [{"metadata": {"name": CHECKPOINT_VOLUME}, "spec": claim}]}
    ]
    for pod in _pod_specs(jobset):
        assert "volumes" not in pod  # the controller adds the claim's volume to each pod
        assert pod["containers"][0]["volumeMounts"] == [
            {"name": CHECKPOINT_VOLUME, "mountPath": "/ckpt"}
        ]


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"checkpoint_volume": "x"}, "need a checkpoint_dir"),
        ({"checkpoint_dir": "ckpt"}, "absolute path"),
        ({"checkpoint_dir": "/c", "checkpoint_volume": "x", "checkpoint_claim": {}}, "not both"),
        ({"checkpoint_dir": "/c", "checkpoint_volume": ""}, "must name"),
        ({"checkpoint_dir": "/c", "checkpoint_volume": {"name": "v", "nfs": {}}}, "its name"),
    ],
)
def test_bad_checkpoint_arguments(kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        leader_workers(
            "lw", "busybox", workers=1, leader_command=["a"], worker_command=["b"], **kwargs
        )


def _render_cli(tmp_path: Path, jobset: JobSet, *flags: str) -> list[dict[str, Any]]:
    path = tmp_path / "js.yaml"
    path.write_text(dump_yaml([jobset]))
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["render", str(path), *flags], stdout=out, stderr=err)
    assert (code, err.getvalue()) == (0, "")
    return list(yaml.safe_load_all(out.getvalue()))


def test_jobsetctl_render_shows_the_injection_and_no_inject_env_leaves_it_out(
    tmp_path: Path,
) -> None:
    jobset = _jobset(_c())
    shown = _render_cli(tmp_path, jobset)
    assert shown == list(render(inject_workload_env(jobset), "default").objects())
    jobs = [d for d in shown if d["kind"] == "Job"]
    assert all(
        _names(j["spec"]["template"]["spec"]["containers"][0])[: len(NAMES)] == NAMES for j in jobs
    )
    assert _render_cli(tmp_path, jobset, "--no-inject-env") == list(
        render(jobset, "default").objects()
    )
