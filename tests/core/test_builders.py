"""Builders: structure, upstream admission rules, rendering, and the launch as a kubelet runs it.

The launch tests take each rendered child Job, make its pods as the Job controller would
(completion-index annotation), resolve the container env through the downward API, expand
``$(VAR)`` references like the kubelet, and execute the command with a fake ``torchrun`` (or a
Python probe) that reports what the training program would see.
"""

from __future__ import annotations

import doctest
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jobset_core import builders, labels
from jobset_core.builders import jax_multislice, leader_workers, pytorch_ddp
from jobset_core.models import JobSet, dump_yaml, load_jobset
from jobset_core.naming import (
    coordinator_endpoint,
    dns1035_label_errors,
    job_name,
    label_value_errors,
)
from jobset_core.render import render
from jobset_core.validation import validate

NAMESPACE = "team-a"


def webhook_problems(jobset: JobSet) -> list[str]:
    """The create-time rules of the upstream webhook (jobset-api.md §4) that builders touch."""
    problems: list[str] = []
    names = [rj.name for rj in jobset.replicated_jobs]
    for index, rjob in enumerate(jobset.replicated_jobs):
        spec = rjob.template.spec
        replicas = rjob.replicas if rjob.replicas is not None else 1
        longest_job = job_name(jobset.name, rjob.name, max(replicas - 1, 0))
        problems += [f"{rjob.name}: job name {e}" for e in dns1035_label_errors(longest_job)]
        if spec.get("completionMode") == "Indexed" and "completions" in spec:
            pod = f"{longest_job}-{spec['completions'] - 1}-abcde"
            problems += [f"{rjob.name}: pod name {e}" for e in dns1035_label_errors(pod)]
        if replicas * spec.get("parallelism", 1) > 2**31 - 1:
            problems.append(f"{rjob.name}: replicas x parallelism too large")
        for dep in rjob.depends_on or []:
            if index == 0 or dep.name not in names[:index]:
                problems.append(f"{rjob.name}: dependsOn {dep.name} is not an earlier job")
    success = jobset.spec.success_policy
    for target in (success.target_replicated_jobs or []) if success else []:
        if target not in names:
            problems.append(f"success target {target} does not exist")
    coordinator = jobset.spec.coordinator
    if coordinator is not None:
        rjob = jobset.replicated_job(coordinator.replicated_job)
        assert rjob is not None, "coordinator replicated job must exist"
        assert 0 <= (coordinator.job_index or 0) < (rjob.replicas or 1)
        assert rjob.template.spec.get("completionMode") == "Indexed"
        assert 0 <= (coordinator.pod_index or 0) < rjob.template.spec["completions"]
        endpoint = coordinator_endpoint(jobset) or ""
        problems += [f"coordinator endpoint {e}" for e in label_value_errors(endpoint)]
    return problems


def assert_valid(jobset: JobSet) -> None:
    """Our full validation finds nothing, and neither does the independent check above."""
    assert validate(jobset) == []
    assert webhook_problems(jobset) == []


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def resolve_env(container: dict[str, Any], pod_meta: dict[str, Any]) -> dict[str, str]:
    """Container env as the kubelet makes it: values (with ``$(VAR)`` of earlier entries
    expanded), and downward-API field references."""
    out: dict[str, str] = {}
    for entry in container["env"]:
        if "value" in entry:
            out[entry["name"]] = expand(entry["value"], out)
            continue
        path = entry["valueFrom"]["fieldRef"]["fieldPath"]
        match = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
        assert match, f"unsupported field path {path}"
        out[entry["name"]] = pod_meta[match.group(1)][match.group(2)]
    return out


NAME_ENV = {"fieldRef": {"fieldPath": builders.JOBSET_NAME_FIELD}}


def expand(arg: str, env: dict[str, str]) -> str:
    """The kubelet's ``$(VAR)`` expansion of command and args."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m[1], m[0]), arg)


def run_pods(jobset: JobSet, tmp_path: Path) -> list[dict[str, Any]]:
    """Run every pod's container command locally; return what each process reported."""
    fake = tmp_path / "torchrun"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        "print(json.dumps({'argv': sys.argv[1:], 'env': dict(os.environ)}))\n"
    )
    fake.chmod(0o755)
    reports = []
    for job in render(jobset, NAMESPACE).jobs:
        pod_template = job["spec"]["template"]
        for index in range(job["spec"]["completions"]):
            meta = {
                "labels": dict(pod_template["metadata"]["labels"]),
                "annotations": {
                    **pod_template["metadata"]["annotations"],
                    labels.JOB_COMPLETION_INDEX: str(index),
                },
            }
            container = pod_template["spec"]["containers"][0]
            env = resolve_env(container, meta)
            argv = [expand(arg, env) for arg in container["command"]]
            proc = subprocess.run(
                argv,
                env={"PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}", **env},
                capture_output=True,
                text=True,
                check=True,
                timeout=30,
            )
            reports.append(json.loads(proc.stdout))
    return reports


PROBE = [sys.executable, "-c", "import json, os, sys; print(json.dumps({'env': dict(os.environ)}))"]


# --------------------------------------------------------------------------------------------
# leader_workers


def test_leader_workers_shape() -> None:
    js = leader_workers(
        "lw",
        "img:1",
        workers=3,
        leader_command=["serve"],
        worker_command=["work"],
        worker_image="img:2",
        port=7000,
        namespace=NAMESPACE,
    )
    assert_valid(js)
    assert [(rj.name, rj.replicas) for rj in js.replicated_jobs] == [("leader", 1), ("workers", 1)]
    leader, workers = (rj.template.spec for rj in js.replicated_jobs)
    assert (leader["parallelism"], leader["completions"]) == (1, 1)
    assert (workers["parallelism"], workers["completions"]) == (3, 3)
    assert js.spec.success_policy is not None
    assert js.spec.success_policy.model_dump(exclude_none=True) == {
        "operator": "All",
        "target_replicated_jobs": ["leader"],
    }
    assert js.spec.coordinator is not None
    assert js.spec.coordinator.replicated_job == "leader"
    assert js.spec.failure_policy is None  # max_restarts=0: the first failure fails the JobSet
    leader_c = leader["template"]["spec"]["containers"][0]
    worker_c = workers["template"]["spec"]["containers"][0]
    assert (leader_c["image"], worker_c["image"]) == ("img:1", "img:2")
    assert (leader_c["command"], worker_c["command"]) == (["serve"], ["work"])
    assert leader_c["ports"] == [{"name": "leader", "containerPort": 7000}]
    assert env_of(leader_c)["COORDINATOR_ADDRESS"] == "$(JOBSET_NAME)-leader-0-0.$(JOBSET_NAME)"
    assert leader_c["env"][0] == {"name": "JOBSET_NAME", "valueFrom": NAME_ENV}
    assert env_of(worker_c)["COORDINATOR_PORT"] == "7000"
    assert env_of(worker_c)["NUM_WORKERS"] == "3"
    assert leader["template"]["spec"]["restartPolicy"] == "Never"


def test_leader_workers_options() -> None:
    js = leader_workers(
        "lw",
        "img",
        workers=1,
        leader_command=["a"],
        worker_command=["b"],
        workers_wait_for_leader=True,
        max_restarts=2,
        env={"LOG": "debug"},
        resources={"requests": {"cpu": 1, "memory": "1Gi"}},
        jobset_labels={"kueue.x-k8s.io/queue-name": "q"},
        suspend=True,
        ttl_seconds_after_finished=60,
    )
    assert_valid(js)
    data = js.to_dict()
    assert data["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "q"}
    assert data["spec"]["failurePolicy"] == {"maxRestarts": 2}
    assert (data["spec"]["suspend"], data["spec"]["ttlSecondsAfterFinished"]) == (True, 60)
    workers = data["spec"]["replicatedJobs"][1]
    assert workers["dependsOn"] == [{"name": "leader", "status": "Ready"}]
    container = workers["template"]["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"] == {"requests": {"cpu": "1", "memory": "1Gi"}}
    assert {"name": "LOG", "value": "debug"} in container["env"]


def test_leader_workers_pods_see_their_place(tmp_path: Path) -> None:
    probe = [*PROBE]
    js = leader_workers("lw", "img", workers=3, leader_command=probe, worker_command=probe)
    reports = run_pods(js, tmp_path)
    assert [r["env"]["COORDINATOR_ADDRESS"] for r in reports] == ["lw-leader-0-0.lw"] * 4
    assert [r["env"].get("WORKER_INDEX") for r in reports] == [None, "0", "1", "2"]


# --------------------------------------------------------------------------------------------
# pytorch_ddp


def test_pytorch_ddp_shape() -> None:
    js = pytorch_ddp(
        "ddp", "torch:2", ["train.py", "--epochs=2"], nodes=4, procs_per_node=8, gpus_per_node=8
    )
    assert_valid(js)
    (rjob,) = js.replicated_jobs
    spec = rjob.template.spec
    assert (rjob.name, rjob.replicas) == ("node", 1)
    assert (spec["completionMode"], spec["parallelism"], spec["completions"]) == ("Indexed", 4, 4)
    assert spec["backoffLimit"] == 0
    assert js.spec.network is not None
    assert js.spec.network.enable_dns_hostnames is True
    container = spec["template"]["spec"]["containers"][0]
    assert container["command"] == [
        "torchrun",
        "--nnodes=4",
        "--nproc_per_node=8",
        "--master_addr=$(MASTER_ADDR)",
        "--master_port=$(MASTER_PORT)",
        "--node_rank=$(NODE_RANK)",
        "train.py",
        "--epochs=2",
    ]
    assert container["resources"] == {"limits": {"nvidia.com/gpu": "8"}}
    assert container["ports"] == [{"name": "torchrun", "containerPort": 29500}]
    env = env_of(container)
    assert env["MASTER_ADDR"] == "$(JOBSET_NAME)-node-0-0.$(JOBSET_NAME)"
    assert expand(env["MASTER_ADDR"], {"JOBSET_NAME": "ddp"}) == coordinator_endpoint(js)
    assert container["env"][0] == {"name": "JOBSET_NAME", "valueFrom": NAME_ENV}
    assert env["NODE_RANK"] == {"fieldRef": {"fieldPath": builders.COMPLETION_INDEX_FIELD}}
    assert (env["MASTER_PORT"], env["NNODES"], env["NPROC_PER_NODE"]) == ("29500", "4", "8")


def test_master_address_is_the_coordinator_pod_behind_the_headless_service() -> None:
    js = pytorch_ddp("ddp", "torch", ["t.py"], nodes=2, procs_per_node=1)
    rendered = render(js, NAMESPACE)
    assert rendered.service is not None
    first_job = rendered.jobs[0]
    pod_spec = first_job["spec"]["template"]["spec"]
    pod_labels = first_job["spec"]["template"]["metadata"]["labels"]
    raw = env_of(pod_spec["containers"][0])["MASTER_ADDR"]
    master = expand(raw, {"JOBSET_NAME": pod_labels[labels.JOBSET_NAME]})
    # Pod 0 of the first Job: hostname <job>-0, in the Service's subdomain.
    assert master == f"{first_job['metadata']['name']}-0.{pod_spec['subdomain']}"
    assert pod_spec["subdomain"] == rendered.service["metadata"]["name"]
    assert master == first_job["metadata"]["labels"][labels.COORDINATOR]


@pytest.mark.parametrize(
    ("nodes", "jobs", "rendezvous"),
    [
        pytest.param(4, 1, "static", id="one-job"),
        pytest.param(6, 3, "static", id="three-jobs-of-two"),
        pytest.param(3, 3, "static", id="one-pod-per-job"),
        pytest.param(4, 2, "c10d", id="c10d"),
    ],
)
def test_pytorch_ddp_every_pod_gets_a_distinct_rank(
    nodes: int, jobs: int, rendezvous: Any, tmp_path: Path
) -> None:
    js = pytorch_ddp(
        "ddp",
        "torch",
        ["train.py", "--lr=0.1"],
        nodes=nodes,
        jobs=jobs,
        procs_per_node="gpu",
        rendezvous=rendezvous,
        torchrun_args=["--max_restarts=0"],
    )
    assert_valid(js)
    reports = run_pods(js, tmp_path)
    assert len(reports) == nodes
    ranks = [int(r["env"]["NODE_RANK"]) for r in reports]
    assert ranks == list(range(nodes)), "pods in job order, completion order"
    for report, rank in zip(reports, ranks, strict=True):
        argv, env = report["argv"], report["env"]
        assert argv[:2] == [f"--nnodes={nodes}", "--nproc_per_node=gpu"]
        assert argv[-3:] == ["--max_restarts=0", "train.py", "--lr=0.1"]
        assert env["MASTER_ADDR"] == "ddp-node-0-0.ddp"
        if rendezvous == "c10d":
            assert "--rdzv_endpoint=ddp-node-0-0.ddp:29500" in argv
            assert "--rdzv_id=ddp" in argv
            assert not any(a.startswith("--node_rank") for a in argv)
        else:
            assert "--master_addr=ddp-node-0-0.ddp" in argv
            assert "--master_port=29500" in argv
            # torchrun takes the rank from --node_rank or from PET_NODE_RANK.
            given = [a for a in argv if a.startswith("--node_rank=")]
            assert given == [f"--node_rank={rank}"] or env.get("PET_NODE_RANK") == str(rank)


def test_pytorch_ddp_without_launcher_runs_the_command_as_is(tmp_path: Path) -> None:
    js = pytorch_ddp("ddp", "torch", PROBE, nodes=4, jobs=2, procs_per_node=1, launcher=False)
    reports = run_pods(js, tmp_path)
    assert [r["env"]["NODE_RANK"] for r in reports] == ["0", "1", "2", "3"]
    assert {r["env"]["NNODES"] for r in reports} == {"4"}


def test_pytorch_ddp_options() -> None:
    js = pytorch_ddp(
        "ddp",
        "torch",
        ["t.py"],
        nodes=4,
        jobs=2,
        procs_per_node=4,
        port=23456,
        gpus_per_node=4,
        gpu_resource="amd.com/gpu",
        resources={"requests": {"cpu": "8"}, "limits": {"memory": "32Gi"}},
        shm_size="8Gi",
        node_selector={"pool": "a100"},
        exclusive_topology="topology.kubernetes.io/rack",
        max_restarts=5,
        replicated_job="trainer",
    )
    assert_valid(js)
    (rjob,) = js.replicated_jobs
    assert (rjob.name, rjob.replicas) == ("trainer", 2)
    assert rjob.template.metadata is not None
    assert rjob.template.metadata.annotations == {
        labels.EXCLUSIVE_TOPOLOGY: "topology.kubernetes.io/rack"
    }
    pod = rjob.template.spec["template"]["spec"]
    container = pod["containers"][0]
    assert container["resources"] == {
        "requests": {"cpu": "8"},
        "limits": {"memory": "32Gi", "amd.com/gpu": "4"},
    }
    assert pod["volumes"] == [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}}
    ]
    assert container["volumeMounts"] == [{"name": "dshm", "mountPath": "/dev/shm"}]
    assert pod["nodeSelector"] == {"pool": "a100"}
    assert env_of(container)["MASTER_PORT"] == "23456"
    assert js.spec.failure_policy is not None
    assert js.spec.failure_policy.max_restarts == 5


# --------------------------------------------------------------------------------------------
# jax_multislice


def test_jax_multislice_shape() -> None:
    js = jax_multislice(
        "v6e",
        "jax:tpu",
        ["python3", "train.py"],
        slices=2,
        hosts_per_slice=4,
        topology_key="cloud.google.com/gke-nodepool",
        chips_per_host=4,
        node_selector={"cloud.google.com/gke-tpu-topology": "4x4"},
        jobset_labels={"kueue.x-k8s.io/queue-name": "multislice-queue"},
        max_restarts=4,
    )
    assert_valid(js)
    (rjob,) = js.replicated_jobs
    assert (rjob.name, rjob.replicas) == ("slice", 2)
    spec = rjob.template.spec
    assert (spec["completionMode"], spec["parallelism"], spec["completions"]) == ("Indexed", 4, 4)
    assert rjob.template.metadata is not None
    assert rjob.template.metadata.annotations == {
        labels.EXCLUSIVE_TOPOLOGY: "cloud.google.com/gke-nodepool"
    }
    container = spec["template"]["spec"]["containers"][0]
    assert container["resources"] == {"limits": {"google.com/tpu": "4"}}
    env = env_of(container)
    assert env["JAX_COORDINATOR_ADDRESS"] == "$(JOBSET_NAME)-slice-0-0.$(JOBSET_NAME):1234"
    assert env["MEGASCALE_COORDINATOR_ADDRESS"] == "$(JOBSET_NAME)-slice-0-0.$(JOBSET_NAME)"
    assert env["JOBSET_NAME"] == NAME_ENV
    assert env["SLICE_ID"] == {"fieldRef": {"fieldPath": builders.JOB_INDEX_FIELD}}
    assert env["HOST_ID"] == {"fieldRef": {"fieldPath": builders.COMPLETION_INDEX_FIELD}}
    assert js.spec.failure_policy is not None
    assert js.spec.failure_policy.max_restarts == 4


def test_jax_one_child_job_per_slice_each_exclusive() -> None:
    js = jax_multislice(
        "jx", "jax", ["run"], slices=3, hosts_per_slice=2, topology_key="pool", megascale=False
    )
    rendered = render(js, NAMESPACE, placement="affinity")
    assert rendered.job_names == ("jx-slice-0", "jx-slice-1", "jx-slice-2")
    for job in rendered.jobs:
        assert job["metadata"]["annotations"][labels.EXCLUSIVE_TOPOLOGY] == "pool"
        affinity = job["spec"]["template"]["spec"]["affinity"]
        assert set(affinity) == {"podAffinity", "podAntiAffinity"}
        env = env_of(job["spec"]["template"]["spec"]["containers"][0])
        assert not any(name.startswith("MEGASCALE_") for name in env)


@pytest.mark.parametrize(
    ("slices", "hosts"),
    [
        pytest.param(2, 4, id="2x4"),
        pytest.param(1, 3, id="single-slice"),
        pytest.param(3, 1, id="one-host-per-slice"),
    ],
)
def test_jax_process_ids(slices: int, hosts: int, tmp_path: Path) -> None:
    js = jax_multislice("jx", "jax", PROBE, slices=slices, hosts_per_slice=hosts, topology_key="p")
    assert_valid(js)
    reports = [r["env"] for r in run_pods(js, tmp_path)]
    assert [int(e["JAX_PROCESS_ID"]) for e in reports] == list(range(slices * hosts))
    assert [int(e["SLICE_ID"]) for e in reports] == [s for s in range(slices) for _ in range(hosts)]
    assert [int(e["HOST_ID"]) for e in reports] == list(range(hosts)) * slices
    assert [e["MEGASCALE_SLICE_ID"] for e in reports] == [e["SLICE_ID"] for e in reports]
    for env in reports:
        assert env["JAX_NUM_PROCESSES"] == str(slices * hosts)
        assert env["JAX_COORDINATOR_ADDRESS"] == "jx-slice-0-0.jx:1234"
        assert (env["NUM_SLICES"], env["HOSTS_PER_SLICE"]) == (str(slices), str(hosts))
        assert env["MEGASCALE_NUM_SLICES"] == str(slices)


# --------------------------------------------------------------------------------------------
# Shared behaviour


BUILDS: dict[str, Callable[[], JobSet]] = {
    "leader-workers": lambda: leader_workers(
        "a", "i", workers=2, leader_command=["x"], worker_command=["y"]
    ),
    "pytorch-ddp": lambda: pytorch_ddp("b", "i", ["t.py"], nodes=4, jobs=2, procs_per_node=1),
    "jax-multislice": lambda: jax_multislice(
        "c", "i", ["r"], slices=2, hosts_per_slice=2, topology_key="k"
    ),
}


COORDINATOR_VARIABLE = {
    "leader-workers": "COORDINATOR_ADDRESS",
    "pytorch-ddp": "MASTER_ADDR",
    "jax-multislice": "JAX_COORDINATOR_ADDRESS",
}


@pytest.mark.parametrize("build", BUILDS.values(), ids=BUILDS.keys())
def test_the_coordinator_address_follows_a_renamed_jobset(
    build: Callable[[], JobSet], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The operator names a JobSet ``<name>-<hash of the task instance>``: every pod must
    still find the coordinator of the JobSet that was created, not of the builder's name."""
    js = build()
    renamed = js.model_copy(
        update={"metadata": js.metadata.model_copy(update={"name": f"{js.name}-0a1b2c3d4e"})}
    )
    expected = coordinator_endpoint(renamed)
    assert expected is not None and expected.startswith(f"{js.name}-0a1b2c3d4e-")
    probe = renamed.model_copy(deep=True)
    for rjob in probe.replicated_jobs:
        for container in rjob.template.spec["template"]["spec"]["containers"]:
            container["command"] = PROBE
    variable = COORDINATOR_VARIABLE[request.node.callspec.id]
    seen = {r["env"][variable].removesuffix(":1234") for r in run_pods(probe, tmp_path)}
    assert seen == {expected}


@pytest.mark.parametrize("build", BUILDS.values(), ids=BUILDS.keys())
def test_builders_return_ordinary_jobsets(build: Callable[[], JobSet]) -> None:
    js = build()
    assert isinstance(js, JobSet)
    # The result is plain user input: strict loading accepts its dump unchanged.
    assert load_jobset(dump_yaml(js)).to_dict() == js.to_dict()
    assert js.spec.network is not None
    assert js.spec.network.publish_not_ready_addresses is True
    for rjob in js.replicated_jobs:
        assert rjob.template.spec["template"]["spec"]["restartPolicy"] == "Never"


@pytest.mark.parametrize(
    ("build", "message"),
    [
        pytest.param(
            lambda: pytorch_ddp("d", "i", ["t"], nodes=5, jobs=2, procs_per_node=1),
            "nodes \\(5\\) must be a multiple of jobs \\(2\\)",
            id="uneven-nodes",
        ),
        pytest.param(
            lambda: pytorch_ddp("d", "i", ["t"], nodes=0, procs_per_node=1),
            "nodes must be at least 1",
            id="no-nodes",
        ),
        pytest.param(
            lambda: jax_multislice("d", "i", ["t"], slices=0, hosts_per_slice=1, topology_key="k"),
            "slices must be at least 1",
            id="no-slices",
        ),
        pytest.param(
            lambda: leader_workers("d", "i", workers=0, leader_command=[], worker_command=[]),
            "workers must be at least 1",
            id="no-workers",
        ),
    ],
)
def test_builder_argument_errors(build: Callable[[], JobSet], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build()


def test_long_names_break_the_upstream_rules() -> None:
    """The checks are not vacuous: a name too long for the pod names fails both."""
    js = pytorch_ddp("x" * 50, "i", ["t"], nodes=16, procs_per_node=1)
    assert any("pod name" in p for p in webhook_problems(js))
    assert validate(js) != []


def test_docstring_examples() -> None:
    result = doctest.testmod(builders, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 3
    assert result.failed == 0
