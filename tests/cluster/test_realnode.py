"""JobSets on the devcluster's real node: real containers, real DNS, real logs, real exits.

Everything is driven through ``jobsetctl run`` (a subprocess, on both backends) or plain API
objects, and checked against what the kubelet and containerd really did. The kwok nodes stay
for scale and scripted states; these tests prove what only a real node can: that the headless
Service names the builders hand out resolve and connect, that logs stream while a container
runs, that exit codes and termination messages arrive, that a restarted JobSet's workload
resumes from its checkpoint, and what the kernel does to a container over its memory limit.

Programs: the shell image (busybox: ``sh``, ``nc``) and the Python image (JAX for CPU,
``examples/workloads/jax_train.py``). ``pytorch_ddp`` without its launcher, on three nodes, is
checked here with a plain Python program (the Python image has no torch): it rendezvouses over
TCP at ``MASTER_ADDR:MASTER_PORT`` and reports every rank's environment. Through ``torchrun``
with a real gloo all-reduce, in the torch image: ``test_realnode_torch.py``.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from jobset_core import jax_multislice, labels, leader_workers, pytorch_ddp
from jobset_core.models import JobSet
from tests.cluster.bodies import in_turn
from tests.cluster.faultproxy import FaultProxy
from tests.cluster.pytest_devcluster import (
    PYTHON_IMAGE,
    SHELL_IMAGE,
    SLICE_LABEL,
    DevCluster,
    RealNode,
)
from tests.core._exclusive import NEVER_FINISH, end_once_all_live, exclusivity_problems

pytestmark = [pytest.mark.cluster, pytest.mark.realnode]

BACKENDS = ["controller", "native"]


def for_real_node(
    jobset: JobSet,
    *,
    volumes: list[dict[str, Any]] | None = None,
    exclusive: bool = True,
) -> dict[str, Any]:
    """The JobSet as a mapping whose pods run on the real node, images never pulled.

    The real node is a single domain of every node label, so it holds one exclusive child Job
    at a time (``alpha.jobset.sigs.k8s.io/exclusive-topology``: the anti-affinity keeps every
    other Job's pods out of the domain). A JobSet of several exclusive child Jobs cannot run
    there together: one Job's pods stay Pending ("didn't match pod anti-affinity rules") until
    the other's end, and a collective program waits for them at its rendezvous until it times
    out. ``exclusive=False`` drops the annotation of every replicated job that has it,
    and fails if none has (the builder's placement is checked where it can hold, on the kwok
    nodes, by the test that asks for this)."""
    body = jobset.to_dict()
    dropped = 0
    for rjob in body["spec"]["replicatedJobs"]:
        annotations = ((rjob["template"].get("metadata") or {}).get("annotations")) or {}
        if not exclusive and annotations.pop(labels.EXCLUSIVE_TOPOLOGY, None) is not None:
            dropped += 1
        pod = rjob["template"]["spec"]["template"]["spec"]
        RealNode.place(pod)
        pod["terminationGracePeriodSeconds"] = 1
        for container in pod["containers"]:
            container["imagePullPolicy"] = "IfNotPresent"
            if volumes:
                container["volumeMounts"] = [
                    {"name": v["name"], "mountPath": "/shared"} for v in volumes
                ]
        if volumes:
            pod["volumes"] = volumes
    assert exclusive or dropped, "exclusive=False, but no replicated job is exclusive"
    return body


@dataclass
class CtlRun:
    code: int
    #: (seconds since start, "out" or "err", line)
    lines: list[tuple[float, str, str]] = field(default_factory=list)

    def text(self, stream: str | None = None) -> str:
        return "\n".join(line for _, s, line in self.lines if stream in (None, s))

    def first(self, needle: str) -> tuple[float, str]:
        for t, _, line in self.lines:
            if needle in line:
                return t, line
        raise AssertionError(f"no line with {needle!r} in:\n{self.text()}")

    def result(self) -> Any:
        _, line = self.first("  result: ")
        return json.loads(line.split("  result: ", 1)[1])


def jobsetctl_run(
    dc: DevCluster, namespace: str, body: dict[str, Any], backend: str, tmp_path: Path, *extra: str
) -> CtlRun:
    """``jobsetctl run FILE --follow-logs`` as a subprocess; every line with its arrival time."""
    path = tmp_path / f"{body['metadata']['name']}.json"
    path.write_text(json.dumps(body))
    cmd = [sys.executable, "-m", "jobset_core.cli", "run", str(path), "-n", namespace]
    cmd += ["--backend", backend, "--follow-logs", "--timeout", "300", *extra]
    started = time.monotonic()
    proc = subprocess.Popen(
        cmd, env=dc.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    run = CtlRun(code=-1)
    lock = threading.Lock()

    def pump(stream: Any, name: str) -> None:
        for line in stream:
            with lock:
                run.lines.append((time.monotonic() - started, name, line.rstrip("\n")))

    pumps = [
        threading.Thread(target=pump, args=(proc.stdout, "out")),
        threading.Thread(target=pump, args=(proc.stderr, "err")),
    ]
    for thread in pumps:
        thread.start()
    try:
        run.code = proc.wait(timeout=360)
    finally:
        if proc.poll() is None:
            proc.kill()
        for thread in pumps:
            thread.join(10)
    return run


def pods_of(dc: DevCluster, namespace: str, jobset: str) -> list[Any]:
    selector = f"{labels.JOBSET_NAME}={jobset}"
    return dc.core.list_namespaced_pod(namespace, label_selector=selector).items


# --------------------------------------------------------------------------------------------
# logs and results


@pytest.mark.parametrize("backend", BACKENDS)
def test_logs_are_followed_live_and_the_result_is_the_termination_message(
    backend: str,
    devcluster: DevCluster,
    real_node: RealNode,
    cluster_namespace: str,
    tmp_path: Path,
) -> None:
    script = (
        "echo first line; sleep 6; echo second line; "
        "echo -n '{\"answer\": 42}' > /dev/termination-log"
    )
    js = leader_workers(
        "live-logs",
        SHELL_IMAGE,
        workers=1,
        leader_command=["sh", "-c", script],
        worker_command=["sh", "-c", "sleep 1"],
    )
    run = jobsetctl_run(devcluster, cluster_namespace, for_real_node(js), backend, tmp_path)
    assert run.code == 0, run.text()
    assert run.result() == {"answer": 42}
    leader = next(
        p
        for p in pods_of(devcluster, cluster_namespace, "live-logs")
        if "leader" in p.metadata.name
    )
    assert leader.spec.node_name == real_node.name
    t_first, _ = run.first("] first line")  # log: [pod] first line
    t_second, _ = run.first("] second line")
    t_done, _ = run.first("Completed: JobSet")
    # streamed while the container ran, not read at the end (6 s apart in the container; the
    # first line may reach a follow that starts late, on a busy machine, from the backlog)
    assert t_second - t_first >= 3, run.text()
    assert t_first < t_second <= t_done


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cut_log_stream_is_read_again_from_where_it_stopped(
    backend: str,
    devcluster: DevCluster,
    real_node: RealNode,
    cluster_namespace: str,
    tmp_path: Path,
) -> None:
    """Every open log stream (and watch) is cut every 1.5 s while the container writes a line
    every half second: the follower opens the log again and skips what it has shown, so every
    line comes exactly once and in order."""
    ticks = 16
    js = leader_workers(
        "cut-logs",
        SHELL_IMAGE,
        workers=1,
        leader_command=["sh", "-c", f"for i in $(seq 1 {ticks}); do echo tick $i; sleep 0.5; done"],
        worker_command=["sh", "-c", "sleep 1"],
    )
    with FaultProxy(devcluster.state_dir) as proxy:
        kubeconfig = proxy.admin_kubeconfig(tmp_path / "proxied.kubeconfig", user="cut-logs")
        with proxy.cutting(1.5, logs=True):
            run = jobsetctl_run(
                devcluster,
                cluster_namespace,
                for_real_node(js),
                backend,
                tmp_path,
                "--kubeconfig",
                str(kubeconfig),
            )
        dropped = proxy.stats.cut_dropped
    assert run.code == 0, run.text()
    shown = [line.split("] ", 1)[1] for _, s, line in run.lines if s == "out" and "] tick " in line]
    assert shown == [f"tick {i}" for i in range(1, ticks + 1)], run.text()
    assert dropped >= 2, "the proxy cut no log stream"  # the leader's log, more than once


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_failed_pod_shows_its_exit_code_and_the_tail_of_its_log(
    backend: str,
    devcluster: DevCluster,
    real_node: RealNode,
    cluster_namespace: str,
    tmp_path: Path,
) -> None:
    script = "for i in 1 2 3; do echo step $i; done; echo disk on fire >&2; exit 7"
    js = leader_workers(
        "fails",
        SHELL_IMAGE,
        workers=1,
        leader_command=["sh", "-c", script],
        worker_command=["sh", "-c", "sleep 30"],
    )
    run = jobsetctl_run(devcluster, cluster_namespace, for_real_node(js), backend, tmp_path)
    assert run.code == 1, run.text()
    assert "Failed: JobSet" in run.text("out")
    tail = run.text("err")
    assert "--- failed pod fails-leader-0-0-" in tail, tail
    assert "step 3" in tail and "disk on fire" in tail
    leader = next(
        p for p in pods_of(devcluster, cluster_namespace, "fails") if "leader" in p.metadata.name
    )
    terminated = leader.status.container_statuses[0].state.terminated
    assert (terminated.exit_code, terminated.reason) == (7, "Error")


# --------------------------------------------------------------------------------------------
# rendezvous at the headless Service's DNS names


@pytest.mark.parametrize("backend", BACKENDS)
def test_leader_workers_meet_at_the_leader_dns_name(
    backend: str,
    devcluster: DevCluster,
    real_node: RealNode,
    cluster_namespace: str,
    tmp_path: Path,
) -> None:
    # The leader serves every connection, records each hello and answers "ok"; it reports
    # who said hello once both workers did. The workers dial $COORDINATOR_ADDRESS (the
    # leader pod's name under the JobSet's headless Service) until their hello is answered.
    # (A leader that took one connection at a time lost a hello in a cold CI run: a second
    # worker's connection, queued behind the first, was reset with its hello already sent.)
    leader = (
        "nc -ll -p 7000 -e sh -c "
        """'read -r line; [ -n "$line" ] && echo "$line" >> /tmp/hellos && echo ok' & """
        "server=$!; "
        'until [ "$(sort -u /tmp/hellos 2>/dev/null | wc -l)" -ge 2 ]; do sleep 0.2; done; '
        "sort -u /tmp/hellos | tr '\\n' ' ' > /dev/termination-log; kill $server"
    )
    worker = (
        'until echo "hello from worker $WORKER_INDEX" | nc -w 5 "$COORDINATOR_ADDRESS" 7000 '
        "| grep -q ok; do sleep 0.5; done; nslookup $COORDINATOR_ADDRESS | tail -2"
    )
    js = leader_workers(
        "meet",
        SHELL_IMAGE,
        workers=2,
        port=7000,
        leader_command=["sh", "-c", leader],
        worker_command=["sh", "-c", worker],
    )
    run = jobsetctl_run(devcluster, cluster_namespace, for_real_node(js), backend, tmp_path)
    assert run.code == 0, run.text()
    assert run.result() == "hello from worker 0 hello from worker 1 "
    pods = pods_of(devcluster, cluster_namespace, "meet")
    leader_pod = next(p for p in pods if "leader" in p.metadata.name)
    assert leader_pod.spec.hostname == "meet-leader-0-0" and leader_pod.spec.subdomain == "meet"


def test_jax_processes_rendezvous_and_train_across_two_pods(
    devcluster: DevCluster, real_node: RealNode, cluster_namespace: str, tmp_path: Path
) -> None:
    data, volume = dataset(real_node, cluster_namespace, "jax")
    js = jax_train_jobset("jax2", data, steps=12, every=6)
    run = jobsetctl_run(
        devcluster, cluster_namespace, for_real_node(js, volumes=volume), "controller", tmp_path
    )
    assert run.code == 0, run.text()
    result = run.result()
    assert (result["processes"], result["steps"], result["resumed_from_step"]) == (2, 12, 0)
    assert result["final_loss"] < 1.0
    _, line = run.first("rendezvous done")
    assert "2 processes" in line
    assert "joining the coordinator jax2-slice-0-0.jax2:1234" in run.text()


def test_jax_multislice_two_slices_of_two_hosts_join_one_runtime_and_reduce(
    devcluster: DevCluster, real_node: RealNode, cluster_namespace: str, tmp_path: Path
) -> None:
    """``jax_multislice`` with 2 slices x 2 hosts: the builder's two child Jobs (one per slice)
    run 4 real JAX processes that join one runtime through the coordinator's headless-Service
    name, then gather and ``psum`` tokens that only each pod knows (from its own UID): a stand-in
    that makes up its result from the environment, without talking to the others, fails.

    The builder's exclusive placement (one slice per domain of ``devcluster/slice``) cannot
    hold on the one real node (see :func:`for_real_node`): the processes run there without it,
    and the same JobSet, placement kept, runs beside them on the kwok nodes (4 slice domains),
    where each slice must get a domain of its own."""
    js = jax_multislice(
        "ms",
        PYTHON_IMAGE,
        ["python3", "/opt/jobset-examples/jax_multislice_check.py"],
        slices=2,
        hosts_per_slice=2,
        topology_key=SLICE_LABEL,
    )
    body = for_real_node(js, exclusive=False)
    pod_spec = body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod_spec["containers"][0]["env"].append(
        {"name": "POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}}
    )
    run = jobsetctl_run(devcluster, cluster_namespace, body, "controller", tmp_path)
    assert run.code == 0, run.text()

    pods = pods_of(devcluster, cluster_namespace, "ms")
    assert len(pods) == 4 and {p.spec.node_name for p in pods} == {real_node.name}
    # Where Kubernetes put each pod (its Job's index, its completion index), and what it saw.
    seen: dict[tuple[int, int], dict[str, Any]] = {}
    for pod in pods:
        where = (
            int(pod.metadata.labels[labels.JOB_INDEX]),
            int(pod.metadata.annotations[labels.JOB_COMPLETION_INDEX]),
        )
        assert pod.metadata.labels["job-name"] == f"ms-slice-{where[0]}"
        terminated = pod.status.container_statuses[0].state.terminated
        assert terminated.exit_code == 0, run.text()
        seen[where] = {**json.loads(terminated.message), "pod": pod}
    assert sorted(seen) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    coordinator_ip = seen[0, 0]["pod"].status.pod_ip
    tokens: dict[int, tuple[int, int, int]] = {}
    for (slice_id, host_id), report in seen.items():
        env = report["env"]
        # all 4 joined, each with its own index: slice * hosts + host
        assert (report["process_count"], report["device_count"]) == (4, 4), report
        assert report["process_index"] == slice_id * 2 + host_id == int(env["JAX_PROCESS_ID"])
        # the slice it was told: the same for a slice's two hosts, 0 and 1 across the slices
        assert env["SLICE_ID"] == env["MEGASCALE_SLICE_ID"] == str(slice_id), report
        assert (env["HOST_ID"], env["NUM_SLICES"], env["MEGASCALE_NUM_SLICES"]) == (
            str(host_id),
            "2",
            "2",
        )
        # the coordinator by its DNS name under the headless Service, resolved to pod 0's IP
        assert env["JAX_COORDINATOR_ADDRESS"] == "ms-slice-0-0.ms:1234"
        assert report["coordinator_ip"] == coordinator_ip
        assert report["hostname"] == f"ms-slice-{slice_id}-{host_id}"
        # its token: from its own UID, which no other pod knows
        assert env["POD_UID"] == report["pod"].metadata.uid
        assert report["token"] == uid_token(env["POD_UID"])
        tokens[report["process_index"]] = (slice_id, host_id, report["token"])
    # the collectives: every process holds every process's token, and the sums
    table = [[index, *tokens[index]] for index in range(4)]
    total = sum(token for _, _, token in tokens.values())
    for (slice_id, _), report in seen.items():
        assert report["gathered"] == table
        assert report["total"] == total
        assert report["slice_total"] == sum(t for s, _, t in tokens.values() if s == slice_id)
    _, line = run.first("rendezvous done")  # the coordinator's log, followed live
    assert "4 processes, 4 devices" in line

    # The placement the real node could not give: each slice alone in a domain of its own.
    # Its pods end together once all four run (tests/core/_exclusive.py says why pods that end
    # at one moment are not enough: a cold CI run met it here too), in this cluster's turn.
    placed = js.to_dict()
    placed["metadata"]["name"] = "ms-placed"
    pod_template = in_turn(placed["spec"]["replicatedJobs"][0])["template"]["spec"]["template"]
    pod_template["metadata"] = {"annotations": dict(NEVER_FINISH)}
    with devcluster.exclusive_turn():
        devcluster.create_jobset(cluster_namespace, placed)
        selector = "jobset.sigs.k8s.io/jobset-name=ms-placed"
        live = asyncio.run(end_once_all_live(devcluster.core, cluster_namespace, selector, 4))
        devcluster.wait_jobset_terminal(cluster_namespace, "ms-placed", timeout=180)
    assert live, "the twin's four pods never ran at once"
    domains = {
        n: lb[SLICE_LABEL] for n, lb in devcluster.node_labels().items() if SLICE_LABEL in lb
    }
    twins = pods_of(devcluster, cluster_namespace, "ms-placed")
    assert {p.spec.node_name for p in twins} <= set(domains)
    assert len({p.metadata.labels["job-name"] for p in twins}) == 2 and len(twins) == 4
    assert not exclusivity_problems(twins, domains, lambda p: p.metadata.labels["job-name"])


def uid_token(uid: str) -> int:
    """The token ``jax_multislice_check.py`` takes from a pod's UID (``POD_UID``)."""
    return int(uid.replace("-", "")[:6], 16) + 1


def test_pytorch_ddp_environment_contract(
    devcluster: DevCluster, real_node: RealNode, cluster_namespace: str, tmp_path: Path
) -> None:
    """Without the launcher (``launcher=False``, the Python image has no torch): every node
    rank meets rank 0 at MASTER_ADDR:MASTER_PORT over TCP; rank 0 reports what each rank saw.
    (torchrun and a real all-reduce: ``test_realnode_torch.py``.)"""
    program = r"""
import json, os, socket, time
names = ("MASTER_ADDR", "MASTER_PORT", "NNODES", "NODE_RANK", "NPROC_PER_NODE")
env = {k: os.environ[k] for k in names}
rank, world, port = int(env["NODE_RANK"]), int(env["NNODES"]), int(env["MASTER_PORT"])
if rank == 0:
    server = socket.create_server(("", port))
    seen = [env]
    while len(seen) < world:
        conn, _ = server.accept()
        seen.append(json.loads(conn.makefile().readline()))
        conn.close()
    seen.sort(key=lambda e: int(e["NODE_RANK"]))
    open("/dev/termination-log", "w").write(json.dumps(seen))
else:
    while True:
        try:
            conn = socket.create_connection((env["MASTER_ADDR"], port), timeout=5)
            break
        except OSError:
            time.sleep(0.5)
    conn.sendall((json.dumps(env) + "\n").encode())
    conn.close()
"""
    js = pytorch_ddp(
        "ddp",
        PYTHON_IMAGE,
        ["python3", "-c", program],
        nodes=3,
        procs_per_node=1,
        launcher=False,
    )
    run = jobsetctl_run(devcluster, cluster_namespace, for_real_node(js), "controller", tmp_path)
    assert run.code == 0, run.text()
    seen = run.result()
    assert [e["NODE_RANK"] for e in seen] == ["0", "1", "2"]
    assert {e["MASTER_ADDR"] for e in seen} == {"ddp-node-0-0.ddp"}
    assert {(e["NNODES"], e["MASTER_PORT"], e["NPROC_PER_NODE"]) for e in seen} == {
        ("3", "29500", "1")
    }


# --------------------------------------------------------------------------------------------
# restarts: the attempt number and the checkpoint


def dataset(real_node: RealNode, namespace: str, name: str) -> tuple[str, list[dict[str, Any]]]:
    """A dataset in the real node's shared folder (written like the example DAG's prepare)."""
    import importlib.util

    assert real_node.shared_dir is not None, "the shared folder of a local devcluster"
    example = Path(__file__).resolve().parents[2] / "examples" / "dags" / "scheduled_retraining.py"
    spec = importlib.util.spec_from_file_location("retraining_example", example)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with warnings.catch_warnings():  # Airflow's own config deprecations, on import
        warnings.simplefilter("ignore", DeprecationWarning)
        spec.loader.exec_module(module)
    folder = real_node.shared_dir / namespace / name
    module.write_dataset(folder / "data")
    volume = [{"name": "shared", "hostPath": {"path": str(folder), "type": "Directory"}}]
    return "/shared/data", volume


def jax_train_jobset(
    name: str, data: str, *, steps: int, every: int, fail_at: int = -1, max_restarts: int = 0
) -> JobSet:
    return jax_multislice(
        name,
        PYTHON_IMAGE,
        [
            "python3",
            "/opt/jobset-examples/jax_train.py",
            f"--data={data}",
            "--checkpoint-dir=/shared/checkpoints",
            f"--steps={steps}",
            f"--checkpoint-every={every}",
            f"--fail-at-step={fail_at}",
            "--fail-exit-code=3",
        ],
        slices=1,
        hosts_per_slice=2,
        topology_key="kubernetes.io/hostname",
        megascale=False,
        max_restarts=max_restarts,
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_restarted_jobset_resumes_from_its_checkpoint(
    backend: str,
    devcluster: DevCluster,
    real_node: RealNode,
    cluster_namespace: str,
    tmp_path: Path,
) -> None:
    data, volume = dataset(real_node, cluster_namespace, f"resume-{backend}")
    js = jax_train_jobset("resume", data, steps=16, every=5, fail_at=12, max_restarts=1)
    body = for_real_node(js, volumes=volume)  # JOBSET_RESTART_ATTEMPT: from the builder
    run = jobsetctl_run(devcluster, cluster_namespace, body, backend, tmp_path)
    assert run.code == 0, run.text()
    assert "restarts=1" in run.text()
    result = run.result()
    assert (result["restart_attempt"], result["resumed_from_step"], result["steps"]) == (1, 10, 16)
    # the first attempt died where it was told to, after its checkpoint of step 10
    assert "[attempt 0 process 0/2] checkpoint step-000010.npz" in run.text()
    assert run.first("checkpoint step-000010.npz")[0] < run.first("restarts=1")[0]


# --------------------------------------------------------------------------------------------
# exit codes and the kernel


def test_an_exit_code_reaches_the_pod_failure_policy(
    devcluster: DevCluster, real_node: RealNode, cluster_namespace: str, tmp_path: Path
) -> None:
    """Exit 42 matches the child Job's podFailurePolicy rule (FailJob, no pod retries), and the
    JobSet's failure policy rule on that Job failure reason fails it without a restart."""
    js = leader_workers(
        "policy",
        SHELL_IMAGE,
        workers=1,
        leader_command=["sh", "-c", "exit 42"],
        worker_command=["sh", "-c", "sleep 30"],
        max_restarts=3,
        backoff_limit=4,
    )
    body = for_real_node(js)
    leader_job = body["spec"]["replicatedJobs"][0]["template"]["spec"]
    leader_job["podFailurePolicy"] = {
        "rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]
    }
    body["spec"]["failurePolicy"]["rules"] = [
        {"action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]}
    ]
    run = jobsetctl_run(devcluster, cluster_namespace, body, "controller", tmp_path)
    assert run.code == 1, run.text()
    assert "restarts=0" in run.text()
    jobs = devcluster.batch.list_namespaced_job(
        cluster_namespace, label_selector=f"{labels.JOBSET_NAME}=policy"
    ).items
    leader = next(j for j in jobs if "leader" in j.metadata.name)
    failed = next(c for c in leader.status.conditions if c.type == "Failed")
    assert failed.reason == "PodFailurePolicy"
    assert "exit code 42" in failed.message
    assert (leader.status.failed or 0) == 1  # no pod retry despite backoffLimit 4


def test_a_container_over_its_memory_limit_is_oom_killed(
    devcluster: DevCluster, real_node: RealNode, cluster_namespace: str
) -> None:
    """cgroup v1 memory limit (the kubelet's cgroupfs driver): the kernel kills the process,
    containerd reports OOMKilled with exit code 137."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "hungry"},
        "spec": RealNode.place(
            {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 1,
                "containers": [
                    {
                        "name": "c",
                        "image": PYTHON_IMAGE,
                        "imagePullPolicy": "Never",
                        "command": [
                            "python3",
                            "-c",
                            "x = bytearray(400 * 1024 * 1024); print(len(x))",
                        ],
                        "resources": {"limits": {"memory": "64Mi", "cpu": "500m"}},
                    }
                ],
            }
        ),
    }
    devcluster.core.create_namespaced_pod(cluster_namespace, pod)

    def finished() -> Any:
        p = devcluster.core.read_namespaced_pod("hungry", cluster_namespace)
        return p if p.status.phase in ("Succeeded", "Failed") else None

    done = devcluster.wait_for(finished, timeout=120, desc="the pod to end")
    terminated = done.status.container_statuses[0].state.terminated
    assert done.status.phase == "Failed"
    assert (terminated.exit_code, terminated.reason) == (137, "OOMKilled")
