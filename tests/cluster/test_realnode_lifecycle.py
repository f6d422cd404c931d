"""The real node's footprint on the machine: a second cluster beside the first, and a crash.

A second devcluster (its own ``DEVCLUSTER_STATE_DIR``, as another checkout would have) starts
while the session's cluster runs: it must get its own bridge, pod range, cgroups, kubelet port
and device-plugin socket. Then every process it recorded is SIGKILLed with a pod running (the
containerd shim, the pause container and the workload outlive them), and ``down`` must remove
everything from the record: processes, cgroups in every hierarchy, the bridge, mounts and the
folders, with no host-wide setting changed and the first cluster untouched.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.pytest_devcluster import DEVCLUSTER_PY, SHELL_IMAGE, DevCluster, RealNode

pytestmark = [pytest.mark.cluster, pytest.mark.realnode]

HOST_PATHS = (
    "/var/lib/kubelet",
    "/run/containerd",
    "/run/netns",
    "/var/log/pods",
    "/opt/containerd",
)
SYSCTLS = (
    "net/ipv4/ip_forward",
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
)


def devcluster_cmd(state: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, DEVCLUSTER_STATE_DIR=str(state))
    env.pop("KUBECONFIG", None)
    return subprocess.run(
        [sys.executable, str(DEVCLUSTER_PY), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def cgroup_mounts() -> list[Path]:
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        if right.split()[0] in ("cgroup", "cgroup2"):
            out.append(Path(left.split()[4]))
    return out


def processes_in(cgroup: str) -> set[int]:
    pids: set[int] = set()
    for mount in cgroup_mounts():
        for dirpath, _, files in os.walk(mount / cgroup):
            if "cgroup.procs" in files:
                pids.update(int(p) for p in Path(dirpath, "cgroup.procs").read_text().split())
    return pids


def mounts_mentioning(path: Path) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            text = (proc / "mountinfo").read_text()
        except OSError:
            continue
        found += [f"{proc.name}: {ln}" for ln in text.splitlines() if str(path) in ln]
    return found


def host_snapshot() -> dict[str, Any]:
    return {
        "paths": {p: os.path.exists(p) for p in HOST_PATHS},
        "sysctls": {k: Path(f"/proc/sys/{k}").read_text().strip() for k in SYSCTLS},
    }


def _assert_own_node(record: dict, first: dict, first_state: Path) -> None:
    """The second cluster's node has its own bridge, range, cgroup, ports and sockets."""
    second = record["real_node"]
    for key in ("bridge", "subnet", "node_ip", "cgroup"):
        assert second[key] != first[key], key
    first_ports = json.loads((first_state / "state.json").read_text())["ports"]
    assert record["ports"]["kubelet-real"] != first_ports["kubelet-real"]
    sockets = [
        Path(rn["dir"]) / "var-lib" / "kubelet" / "device-plugins" / "kubelet.sock"
        for rn in (first, second)
    ]
    assert all(s.exists() for s in sockets), sockets  # one per cluster, none in /var/lib


def _run_pod(state: Path, record: dict) -> None:
    """A pod on the second cluster's real node, Ready, with an IP of its range."""
    kubectl = [str(Path(record["bin_dir"]) / "kubectl"), "--kubeconfig", str(state / "kubeconfig")]
    container = {
        "name": "c",
        "image": SHELL_IMAGE,
        "imagePullPolicy": "Never",
        "command": ["sleep", "3600"],
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "survivor", "namespace": "default"},
        "spec": RealNode.place({"containers": [container]}),
    }
    subprocess.run(
        [*kubectl, "apply", "-f", "-"],
        input=json.dumps(pod),
        text=True,
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [*kubectl, "wait", "--for=condition=Ready", "pod/survivor", "--timeout=120s"],
        check=True,
        capture_output=True,
    )
    ip = subprocess.run(
        [*kubectl, "get", "pod", "survivor", "-o", "jsonpath={.status.podIP}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert ip.startswith(record["real_node"]["subnet"].rsplit(".", 1)[0] + ".")


def _crash(record: dict) -> None:
    """SIGKILL every process the cluster recorded; the pod's processes stay behind."""
    recorded = [c["pid"] for c in record["components"].values()]
    for pid in recorded:
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(
        Path(f"/proc/{p}/status").exists()
        and "State:\tZ" not in Path(f"/proc/{p}/status").read_text()
        for p in recorded
    ):
        time.sleep(0.2)
    left = processes_in(record["real_node"]["cgroup"])
    assert left, "the pod's processes (shim, pause, sleep) outlive the kubelet and containerd"


def _assert_nothing_left(second: dict, state: Path, before: dict) -> None:
    """Nothing of the second cluster is left, from its record alone."""
    assert processes_in(second["cgroup"]) == set()
    assert not [
        str(m / second["cgroup"]) for m in cgroup_mounts() if (m / second["cgroup"]).exists()
    ]
    assert not Path(f"/sys/class/net/{second['bridge']}").exists()
    assert not Path(second["dir"]).exists()
    assert mounts_mentioning(state) == []
    assert host_snapshot() == before


def test_a_second_cluster_gets_its_own_node_and_a_crash_leaves_nothing_behind(
    devcluster: DevCluster, real_node: RealNode, tmp_path: Path
) -> None:
    before = host_snapshot()
    state = tmp_path / "second"
    assert devcluster.state_dir is not None
    up = devcluster_cmd(state, "up")
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        record = json.loads((state / "state.json").read_text())
        _assert_own_node(record, real_node.record, devcluster.state_dir)
        _run_pod(state, record)
        _crash(record)
    finally:
        down = devcluster_cmd(state, "down", "--force")
    assert down.returncode == 0, down.stdout + down.stderr
    _assert_nothing_left(record["real_node"], state, before)
    # and the first cluster did not notice
    first = real_node.record
    status = devcluster_cmd(devcluster.state_dir, "status", "--json")
    assert json.loads(status.stdout)["healthy"], status.stdout
    assert Path(f"/sys/class/net/{first['bridge']}").exists()
