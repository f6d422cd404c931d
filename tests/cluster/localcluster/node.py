"""The devcluster's real node: one kubelet with containerd, runc, CNI and CoreDNS.

Everything the node creates is recorded in ``state.json`` (``real_node``) *before* it is
created, so that ``down`` removes it from the record even after every process was SIGKILLed:

* a Linux bridge ``dcbr-NNN`` carrying the node IP ``198.(18+N//256).(N%256).1/24`` (the
  benchmarking range 198.18.0.0/15, split into 512 ranges; one per running cluster), which is
  also the pods' on-link gateway and CoreDNS's address (no default route, no forwarding:
  pods reach each other and the host only);
* one ``iptables`` rule in the nat table, standing in for kube-proxy: the ``kubernetes``
  Service's address (``10.96.0.1:443``), from this bridge only, goes to the API server on
  loopback, so pods use in-cluster configuration with their service account's token;
* cgroups ``/devcluster-NNN`` in every cgroup hierarchy: the node's processes (containerd,
  its shims, the kubelet, CoreDNS) live in ``/devcluster-NNN/node``, and the kubelet's
  ``cgroupRoot`` is ``/devcluster-NNN``, so its ``kubepods`` tree is ours alone. ``down``
  kills every process left below ``/devcluster-NNN`` and removes the cgroups, deepest first;
* a private mount namespace (the ``node-ns`` component) that containerd and the kubelet join.
  Inside it ``/run``, ``/var/lib`` and ``/var/log`` are bind mounts of folders in
  ``<state>/node/``: the paths the kubelet and containerd insist on
  (``/var/lib/kubelet/device-plugins/kubelet.sock``, ``/run/containerd/s``, ``/run/netns``,
  ``/var/log/containers``, ...) land in the state folder, per cluster. Every mount the
  kubelet and the CRI make (volumes, rootfs overlays, network namespaces) exists only in that
  namespace and disappears with its last process. The kernel tunables the kubelet wants
  (``vm.overcommit_memory=1``, ``kernel.panic=10``, ...) are files of ours bind-mounted over
  ``/proc/sys/...`` in the namespace, so the kubelet (``protectKernelDefaults: true``) finds
  them set and the host's values never change.

The host side (packages, network, cgroups) is ``node_host.py``, the configuration files
``node_config.py``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .common import ENTRY, env_flag, log
from .kube import Kube, http_ok
from .node_config import (
    KUBELET_SYSCTLS,
    NODE_LABEL,
    NODE_NAME,
    NS_BINDS,
    RBAC,
    cni_config,
    containerd_config,
    corefile,
    kubelet_config,
    node_dir,
    ns_path,
)
from .node_host import (
    POD_RANGE,
    RANGES,
    _read,
    add_service_nat,
    bridge_exists,
    cgroup_create,
    cgroup_join,
    cgroup_kill,
    cgroup_remove,
    create_bridge,
    delete_bridge,
    delete_service_nat,
    machine_lock,
    mounts_below,
    preferred_range,
    range_for,
    ranges_in_use,
    service_nat_rule,
)
from .pki import make_leaf, write_kubeconfig
from .procs import Launch, State, log_tail, wait_until

#: Images at least this big are imported while the control plane finishes starting.
BACKGROUND_IMPORT_BYTES = 50_000_000
#: The ports `up` picks for the real node (beside the control plane's).
PORT_NAMES = ["kubelet-real", "kubelet-healthz", "coredns-health", "coredns-ready"]


def enabled() -> bool:
    """``DEVCLUSTER_REAL_NODE=0`` (or false/no/off) turns the real node off."""
    return env_flag("DEVCLUSTER_REAL_NODE")


# --------------------------------------------------------------------------------------
# up
# --------------------------------------------------------------------------------------


def plan(st: State) -> dict:
    """Choose this cluster's range, bridge and cgroup, record them, create bridge and
    cgroups (under the machine-wide lock, so two clusters starting at once never pick the
    same range)."""
    root = st.root
    with machine_lock("real-node-net"):
        used = ranges_in_use()
        first = preferred_range(root)
        for i in range(RANGES):
            index = (first + i) % RANGES
            if index not in used:
                break
        else:
            raise RuntimeError(
                f"all {RANGES} pod ranges of {POD_RANGE} are in use on this machine "
                "(stale clusters? `make cluster-down` in their checkouts)"
            )
        net = range_for(index)
        st.data["real_node"] = {
            "node_name": NODE_NAME,
            **net,
            "dir": str(node_dir(root)),
            "ip_forward_before": _read("/proc/sys/net/ipv4/ip_forward"),
        }
        st.save()  # recorded before it exists: a crash from here on is cleaned by `down`
        create_bridge(net)
        cgroup_create(net["cgroup"])
    return st.data["real_node"]


def _route_the_service(up: Launch, net: dict) -> None:
    """Pods reach the API server as on any cluster: at the ``kubernetes`` Service, with their
    service account's token (in-cluster configuration). The rule is recorded before it
    exists, so that ``down`` removes it whatever happens."""
    rule = service_nat_rule(net["bridge"], up.ports["apiserver"])
    up.st.data["real_node"]["service_nat"] = rule
    up.st.save()
    add_service_nat(net["bridge"], rule)


def write_configs(up: Launch, net: dict, images: dict) -> None:
    """The node's folders, configuration files, certificates and kubeconfig."""
    root, pki, nd = up.root, up.pki, node_dir(up.root)
    for sub in ("tmp", "cni", "cni-ipam", "sysctl", "shared", *NS_BINDS):
        (nd / sub).mkdir(parents=True, exist_ok=True)
    for key, value in KUBELET_SYSCTLS.items():
        (nd / "sysctl" / key.replace("/", ".")).write_text(value + "\n")
    (nd / "resolv.conf").write_text(f"nameserver {net['node_ip']}\n")
    (nd / "containerd.toml").write_text(containerd_config(nd, images["pause"]["ref"]))
    (nd / "cni" / "10-devcluster.conflist").write_text(json.dumps(cni_config(nd, net), indent=2))
    (nd / "Corefile").write_text(corefile(net, root / "kubeconfig", up.ports))
    node_ip = net["node_ip"]
    make_leaf(
        pki,
        "real-kubelet",
        f"/CN={NODE_NAME}",
        "serverAuth",
        f"IP:{node_ip},IP:127.0.0.1,DNS:{NODE_NAME}",
    )
    make_leaf(pki, "real-node", f"/O=system:nodes/CN=system:node:{NODE_NAME}", "clientAuth")
    write_kubeconfig(
        nd / "kubelet.kubeconfig", up.st.data["server"], pki, user=NODE_NAME, cert="real-node"
    )
    (nd / "kubelet.json").write_text(json.dumps(kubelet_config(nd, net, up.ports, pki), indent=2))


class _Node:
    """The real node's processes as ``start`` starts them: all in the node's cgroup, all
    (but CoreDNS) inside its mount namespace."""

    def __init__(self, up: Launch, node_bin: Path, net: dict):
        self.up = up
        self.bin = node_bin
        self.net = net
        self.nd = node_dir(up.root)
        self.env = dict(
            up.env, PATH=f"{node_bin}:/usr/sbin:/usr/bin:/sbin:/bin", TMPDIR=str(self.nd / "tmp")
        )
        self.enter: list[str] = []
        self.ctr: list[str] = []

    def in_cgroup(self) -> None:
        cgroup_join(self.net["cgroup"])

    def start(self, name: str, argv: list[str], health: dict | None = None):
        return self.up.start(name, argv, health, env=self.env, preexec=self.in_cgroup)

    def namespace(self) -> None:
        """The ``node-ns`` holder: ``unshare --mount`` running ``devcluster.py node-ns``."""
        argv = ["unshare", "--mount", "--propagation", "private", sys.executable, str(ENTRY)]
        p_ns = self.start("node-ns", [*argv, "node-ns", "--state-dir", str(self.up.root)])
        self.up.wait("node mount namespace", (self.nd / "ns-ready").exists, 20, 0.05)
        self.holder = p_ns.pid
        self.enter = ["nsenter", f"--mount=/proc/{self.holder}/ns/mnt", "--"]

    def containerd(self, t: float) -> None:
        sock = ns_path(self.holder, "/run/containerd/containerd.sock")
        self.start(
            "containerd",
            [
                *self.enter,
                str(self.bin / "containerd"),
                "--config",
                str(self.nd / "containerd.toml"),
            ],
            health={"unix": sock},
        )
        self.ctr = [str(self.bin / "ctr"), "--address", sock, "--namespace", "k8s.io"]
        self.up.wait(
            "containerd socket",
            lambda: (
                subprocess.run([*self.ctr, "version"], capture_output=True, check=False).returncode
                == 0
            ),
            30,
            0.1,
        )
        log(f"real node: containerd ready ({time.monotonic() - t:.1f}s)")

    def coredns(self) -> None:
        self.start(
            "coredns",
            [str(self.bin / "coredns"), "-conf", str(self.nd / "Corefile")],
            health={"url": f"http://127.0.0.1:{self.up.ports['coredns-ready']}/ready"},
        )

    def import_images(self, images: dict) -> list[dict]:
        """Small images first and at once (the sandbox image is needed by every pod); return
        the imports of the big ones, which go on while the rest of the cluster gets ready."""
        by_size = sorted(images.values(), key=lambda i: i["size"])
        small = [i for i in by_size if i["size"] < BACKGROUND_IMPORT_BYTES]
        for image in small:
            wait_import(start_import(self.ctr, image, self.nd), self.up.watched)
        return [start_import(self.ctr, i, self.nd) for i in by_size if i not in small]

    def kubelet(self) -> None:
        code, body = self.up.kube.request(
            "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", RBAC
        )
        if code not in (200, 201, 409):
            raise RuntimeError(f"creating the node's ClusterRoleBinding failed: {code} {body}")
        nd = self.nd
        self.start(
            "kubelet",
            [
                *self.enter,
                str(self.bin / "kubelet"),
                f"--config={nd / 'kubelet.json'}",
                f"--kubeconfig={nd / 'kubelet.kubeconfig'}",
                f"--hostname-override={NODE_NAME}",
                f"--node-ip={self.net['node_ip']}",
                f"--node-labels={NODE_LABEL}=true",
                "--root-dir=/var/lib/kubelet",
                "--v=1",
            ],
            health={"url": f"http://127.0.0.1:{self.up.ports['kubelet-healthz']}/healthz"},
        )


def start(up: Launch, node_bin: Path, images: dict):
    """Start the node (after the API server is up); return a function that waits for it."""
    t = time.monotonic()
    net = plan(up.st)
    _route_the_service(up, net)
    write_configs(up, net, images)
    node = _Node(up, node_bin, net)
    node.namespace()
    node.containerd(t)
    node.coredns()
    importing = node.import_images(images)
    node.kubelet()
    kube, ready_url = up.kube, f"http://127.0.0.1:{up.ports['coredns-ready']}/ready"

    def wait() -> None:
        for job in importing:
            wait_import(job, up.watched)
        up.wait("real node Ready", lambda: node_ready(kube), 90, 0.2)
        up.wait("CoreDNS ready", lambda: http_ok(ready_url)[0], 60, 0.2)
        log(
            f"real node {NODE_NAME} Ready: {net['node_ip']} on {net['bridge']}, pods in "
            f"{net['subnet']}, DNS {net['node_ip']}:53 ({time.monotonic() - t:.1f}s)"
        )

    return wait


def start_import(ctr: list[str], image: dict, nd: Path) -> dict:
    """``ctr images import`` of one archive, as a child process."""
    log_file = nd / f"import-{image['name']}.log"
    with open(log_file, "wb") as out:
        proc = subprocess.Popen(
            [*ctr, "images", "import", "--local", str(image["archive"])],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    return {"image": image, "proc": proc, "log": log_file, "t": time.monotonic()}


def wait_import(job: dict, watched: dict, timeout: float = 300) -> None:
    image, proc = job["image"], job["proc"]
    try:
        wait_until(f"import of {image['ref']}", lambda: proc.poll() is not None, timeout, watched)
    finally:
        if proc.poll() is None:
            proc.kill()
    if proc.returncode != 0:
        raise RuntimeError(
            f"importing image {image['ref']} failed: {log_tail(str(job['log']), 20)}"
        )
    log(
        f"real node: image {image['ref']} imported "
        f"({image['size'] / 1e6:.0f} MB, {time.monotonic() - job['t']:.1f}s)"
    )


def node_ready(kube: Kube) -> bool:
    code, node = kube.get(f"/api/v1/nodes/{NODE_NAME}")
    if code != 200:
        return False
    return any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in node.get("status", {}).get("conditions", [])
    )


def health_row(root: Path, st: State) -> tuple[str, bool, str] | None:
    rn = st.data.get("real_node")
    if not rn or not (root / "pki" / "admin.crt").exists():
        return None
    try:
        kube = Kube(st.data["server"], root / "pki")
        ready = node_ready(kube)
    except Exception as e:
        return ("real-node", False, str(e))
    detail = (
        f"{rn['node_name']} {'Ready' if ready else 'NOT Ready'}: {rn['node_ip']} on "
        f"{rn['bridge']}, pods {rn['subnet']}, cgroup /{rn['cgroup']}"
    )
    return ("real-node", ready, detail)


# --------------------------------------------------------------------------------------
# down: from the record, whatever is still alive
# --------------------------------------------------------------------------------------


def cleanup(st: State, quiet: bool) -> list[str]:
    """Remove everything the real node created; return what could not be removed."""
    rn = st.data.get("real_node")
    if not rn:
        return []
    problems: list[str] = []
    survivors = cgroup_kill(rn["cgroup"])
    if survivors:
        problems.append(f"processes in cgroup /{rn['cgroup']} survived SIGKILL: {survivors}")
    problems += [f"cgroup {c} could not be removed" for c in cgroup_remove(rn["cgroup"])]
    if rn.get("service_nat") and not delete_service_nat(rn["service_nat"]):
        problems.append(f"iptables rule left: -t nat {' '.join(rn['service_nat'])}")
    delete_bridge(rn["bridge"])
    if bridge_exists(rn["bridge"]):
        problems.append(f"bridge {rn['bridge']} could not be deleted")
    nd = Path(rn["dir"])
    # Mounts exist only in the node's (now empty, hence gone) mount namespace; make sure
    # none is visible here before deleting the folder.
    for mount in mounts_below(nd):
        subprocess.run(["umount", "-l", mount], capture_output=True, check=False)
    if mounts_below(nd):
        problems.append(f"mounts left below {nd}: {mounts_below(nd)}")
    else:
        shutil.rmtree(nd, ignore_errors=True)
    fwd = _read("/proc/sys/net/ipv4/ip_forward")
    if rn.get("ip_forward_before") and fwd != rn["ip_forward_before"]:
        problems.append(f"net.ipv4.ip_forward changed to {fwd} while the node ran")
    if not problems:
        del st.data["real_node"]
        if not quiet:
            log(
                f"real node removed: bridge {rn['bridge']}, cgroups /{rn['cgroup']}, "
                f"{nd} (no mounts, no processes left)"
            )
    return problems
