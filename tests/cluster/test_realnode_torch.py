"""``pytorch_ddp`` through its ``torchrun`` launcher, in real pods on the devcluster's real node.

The image ``devcluster.local/python-torch:1`` carries Debian's CPU build of PyTorch (1.13 on
Python 3.11, cut down to what ``torch`` loads; see ``tests/cluster/localcluster/images.py``)
and ``examples/workloads/ddp_check.py``. The JobSet is the builder's, launcher included: each
pod runs ``torchrun`` with the node count, the processes per node and the static rendezvous
the builder writes (``--master_addr/--master_port/--node_rank`` from its variables), and
torchrun starts the pod's worker processes, which join one gloo process group across the pods
and reduce tokens that only each process knows (from its own pod's UID). The test recomputes
every expected value from the API: the pods' indexes, IPs and UIDs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jobset_core import labels, pytorch_ddp
from tests.cluster.pytest_devcluster import DevCluster, RealNode
from tests.cluster.test_realnode import for_real_node, jobsetctl_run, pods_of

pytestmark = [pytest.mark.cluster, pytest.mark.realnode]

TORCH_IMAGE = "devcluster.local/python-torch:1"
#: torch 1.13's torchrun crashes on Python 3.11 with its default output handling; with the
#: workers' stderr redirected and teed it runs (see docs/how-to/distributed-training.md).
TORCHRUN_ARGS = ["--redirects=2", "--tee=2"]


def uid_token(uid: str, local_rank: int) -> int:
    """The token ``ddp_check.py`` takes from its pod's UID and its local rank."""
    return int(uid.replace("-", "")[:6], 16) * 4 + local_rank + 1


def test_pytorch_ddp_torchrun_two_pods_join_one_gloo_group_and_reduce(
    devcluster: DevCluster, real_node: RealNode, cluster_namespace: str, tmp_path: Path
) -> None:
    """``pytorch_ddp`` with 2 nodes x 2 processes, under the builder's ``torchrun``: 4 real
    torch processes in 2 pods rendezvous at the master's headless-Service name, each with the
    rank its pod's completion index and its local rank give, then ``all_gather``,
    ``all_reduce`` and average DDP gradients of tokens that only each process knows. Pods given
    the same node rank, a master they cannot reach, or a stand-in that does not talk to the
    others cannot report the others' tokens, their sum and their mean."""
    nodes, procs = 2, 2
    js = pytorch_ddp(
        "ddp",
        TORCH_IMAGE,
        ["/opt/jobset-examples/ddp_check.py"],
        nodes=nodes,
        procs_per_node=procs,
        torchrun_args=TORCHRUN_ARGS,
    )
    body = for_real_node(js)
    container = body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "containers"
    ][0]
    argv = [*(container.get("command") or []), *(container.get("args") or [])]
    assert argv[0] == "torchrun", argv  # the builder's launcher, not the program itself
    container["env"].append(
        {"name": "POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}}
    )
    run = jobsetctl_run(devcluster, cluster_namespace, body, "controller", tmp_path)
    assert run.code == 0, run.text()

    pods = pods_of(devcluster, cluster_namespace, "ddp")
    assert len(pods) == nodes and {p.spec.node_name for p in pods} == {real_node.name}
    by_index = {int(p.metadata.annotations[labels.JOB_COMPLETION_INDEX]): p for p in pods}
    assert sorted(by_index) == [0, 1]
    master_ip = by_index[0].status.pod_ip
    world = nodes * procs
    # What each process should have seen, from the API alone: rank = node * procs + local.
    tokens = {
        node * procs + local: uid_token(by_index[node].metadata.uid, local)
        for node in range(nodes)
        for local in range(procs)
    }
    table = [[rank, rank // procs, rank % procs, tokens[rank]] for rank in range(world)]
    total = sum(tokens.values())
    reports: dict[int, dict[str, Any]] = {}
    for node, pod in by_index.items():
        terminated = pod.status.container_statuses[0].state.terminated
        assert terminated.exit_code == 0, run.text()
        mine = json.loads(terminated.message)  # the pod's processes, from its local rank 0
        assert [r["rank"] for r in mine] == [node * procs + local for local in range(procs)]
        for report in mine:
            rank, env = report["rank"], report["env"]
            local = rank - node * procs
            # torchrun's view: this pod is node `node` of 2, its processes ranks node*2 + 0..1
            assert (report["world_size"], report["backend"]) == (world, "gloo"), report
            assert (env["RANK"], env["WORLD_SIZE"]) == (str(rank), str(world))
            assert (env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"]) == (str(local), str(procs))
            assert (env["GROUP_RANK"], env["GROUP_WORLD_SIZE"]) == (str(node), str(nodes))
            # the builder's variables, the rank from the pod's own completion index
            assert (env["NODE_RANK"], env["NNODES"], env["NPROC_PER_NODE"]) == (
                str(node),
                str(nodes),
                str(procs),
            )
            # the master by its DNS name under the headless Service, resolved to pod 0's IP
            assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("ddp-node-0-0.ddp", "29500")
            assert report["master_ip"] == master_ip
            assert report["hostname"] == f"ddp-node-0-{node}"
            # its token: from its own pod's UID, which no other pod knows
            assert env["POD_UID"] == pod.metadata.uid
            assert report["token"] == tokens[rank]
            reports[rank] = report
    assert sorted(reports) == list(range(world))
    # the collectives: every process holds every process's token, their sum and their mean
    for report in reports.values():
        assert report["gathered"] == table
        assert report["total"] == total
        assert report["ddp_mean"] == total / world
    _, line = run.first("process group ready")  # the workers' output, followed live
    assert f"{world} processes" in line
