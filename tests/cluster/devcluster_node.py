"""The devcluster's real node: one kubelet with containerd, runc, CNI and CoreDNS.

Standard library only; imported by ``devcluster.py`` (whose helpers it uses). Everything the
node creates is recorded in ``state.json`` (``real_node``) *before* it is created, so that
``down`` removes it from the record even after every process was SIGKILLed:

* a Linux bridge ``dcbr-NNN`` carrying the node IP ``198.(18+N//256).(N%256).1/24`` (the
  benchmarking range 198.18.0.0/15, split into 512 ranges; one per running cluster), which is
  also the pods' on-link gateway and CoreDNS's address (no default route, no NAT, no
  forwarding: pods reach each other and the host only);
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
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import devcluster as dc

NODE_NAME = "devcluster-real-node"
NODE_LABEL = "devcluster/real-node"
#: Only pods that tolerate this taint (and select the label) land on the real node.
NODE_TAINT = {"key": NODE_LABEL, "value": "true", "effect": "NoSchedule"}
POD_RANGE = ipaddress.ip_network("198.18.0.0/15")
RANGES = POD_RANGE.num_addresses // 256  # 512 ranges of /24
BRIDGE_PREFIX = "dcbr-"
CGROUP_PREFIX = "devcluster-"
#: A closed loopback port: every registry resolves here, so a pull never leaves the machine
#: (and fails at once with "connection refused", which is what ErrImagePull tests want).
DEAD_REGISTRY = "http://127.0.0.1:9"
CLUSTER_DOMAIN = "cluster.local"
RUNC = "/usr/sbin/runc"
#: Images at least this big are imported while the control plane finishes starting.
BACKGROUND_IMPORT_BYTES = 50_000_000
CNI_BIN = "/usr/lib/cni"

#: Debian packages the node needs, with a file that tells whether each is installed.
SETUP_PACKAGES = {
    "runc": RUNC,
    "containernetworking-plugins": f"{CNI_BIN}/bridge",
    "iproute2": "/usr/sbin/ip",
    "util-linux": "/usr/bin/nsenter",
    "mount": "/usr/bin/mount",
    "busybox-static": "/bin/busybox",
    "mmdebstrap": "/usr/bin/mmdebstrap",
    "binutils": "/usr/bin/strip",
}

#: The kernel tunables kubelet's container manager insists on (it would write them
#: host-wide otherwise); shown to it with these values inside the node's mount namespace.
KUBELET_SYSCTLS = {
    "vm/overcommit_memory": "1",
    "vm/panic_on_oom": "0",
    "kernel/panic": "10",
    "kernel/panic_on_oops": "1",
    "kernel/keys/root_maxkeys": "1000000",
    "kernel/keys/root_maxbytes": "25000000",
}
#: Folders of <state>/node bind-mounted over host paths inside the node's mount namespace.
NS_BINDS = {"run": "/run", "var-lib": "/var/lib", "var-log": "/var/log"}


def enabled() -> bool:
    """``DEVCLUSTER_REAL_NODE=0`` (or false/no/off) turns the real node off."""
    return os.environ.get("DEVCLUSTER_REAL_NODE", "1").strip().lower() not in (
        "0",
        "false",
        "no",
        "off",
    )


# --------------------------------------------------------------------------------------
# set-up: Debian packages
# --------------------------------------------------------------------------------------


def missing_packages() -> list[str]:
    return [pkg for pkg, path in SETUP_PACKAGES.items() if not os.path.exists(path)]


def setup(quiet: bool = False) -> None:
    """Install the Debian packages the real node and the image builds need, when missing."""
    missing = missing_packages()
    if not missing:
        if not quiet:
            dc.log("real-node packages are installed (" + ", ".join(SETUP_PACKAGES) + ")")
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        dc.die(
            "the real node needs these Debian packages: "
            + " ".join(missing)
            + " (apt-get install --no-install-recommends ...; or DEVCLUSTER_REAL_NODE=0)"
        )
    dc.log(f"installing Debian packages: {' '.join(missing)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing]
    t = time.monotonic()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        # a brand-new machine may have no package lists yet
        subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, check=False)
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if r.returncode != 0 or missing_packages():
        dc.die(f"apt-get install {' '.join(missing)} failed:\n{r.stdout[-2000:]}{r.stderr}")
    dc.log(f"installed {' '.join(missing)} ({time.monotonic() - t:.0f}s)")


# --------------------------------------------------------------------------------------
# network: one /24 of 198.18.0.0/15 and one bridge per cluster
# --------------------------------------------------------------------------------------


def range_for(index: int) -> dict:
    net = ipaddress.ip_network(f"{POD_RANGE.network_address + index * 256}/24")
    hosts = list(net.hosts())
    return {
        "index": index,
        "subnet": str(net),
        "node_ip": str(hosts[0]),
        "range_start": str(hosts[9]),
        "range_end": str(hosts[-5]),
        "bridge": f"{BRIDGE_PREFIX}{index:03d}",
        "cgroup": f"{CGROUP_PREFIX}{index:03d}",
    }


def ranges_in_use() -> set[int]:
    """Ranges taken on this machine: by an interface address, a bridge or a cgroup of ours."""
    used: set[int] = set()
    out = subprocess.run(
        ["ip", "-o", "addr", "show"], capture_output=True, text=True, check=False
    ).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) > 3 and parts[2] == "inet":
            ip = ipaddress.ip_interface(parts[3]).ip
            if ip in POD_RANGE:
                used.add((int(ip) - int(POD_RANGE.network_address)) // 256)
    names = subprocess.run(
        ["ip", "-o", "link", "show"], capture_output=True, text=True, check=False
    ).stdout
    for line in names.splitlines():
        name = line.split(":", 2)[1].strip().split("@")[0] if ":" in line else ""
        if name.startswith(BRIDGE_PREFIX) and name[len(BRIDGE_PREFIX) :].isdigit():
            used.add(int(name[len(BRIDGE_PREFIX) :]))
    for mount in cgroup_mounts():
        with contextlib.suppress(OSError):
            for entry in os.listdir(mount):
                tail = entry[len(CGROUP_PREFIX) :]
                if entry.startswith(CGROUP_PREFIX) and tail.isdigit():
                    used.add(int(tail))
    return used


def preferred_range(root: Path) -> int:
    """The range a state folder asks for first (stable across its restarts)."""
    return int(hashlib.sha256(str(root).encode()).hexdigest()[:8], 16) % RANGES


@contextlib.contextmanager
def machine_lock(name: str):
    """A lock shared by every devcluster on this machine (all checkouts, all users of the
    cache folder)."""
    locks = dc.cache_root().parent / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with open(locks / f"{name}.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def create_bridge(net: dict) -> None:
    bridge = net["bridge"]
    steps = [
        ["ip", "link", "add", "name", bridge, "type", "bridge"],
        ["ip", "addr", "add", f"{net['node_ip']}/24", "dev", bridge],
        ["ip", "link", "set", bridge, "up"],
    ]
    for cmd in steps:
        r = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed: {r.stderr.strip()}")


def bridge_exists(bridge: str) -> bool:
    return os.path.exists(f"/sys/class/net/{bridge}")


def delete_bridge(bridge: str) -> None:
    if bridge_exists(bridge):
        subprocess.run(["ip", "link", "del", bridge], capture_output=True, check=False)


# --------------------------------------------------------------------------------------
# cgroups (v1 hierarchies and the unified one)
# --------------------------------------------------------------------------------------


def cgroup_mounts() -> list[Path]:
    """Mount points of every cgroup hierarchy (v1 controllers, named, unified)."""
    mounts = []
    with contextlib.suppress(OSError), open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fstype = right.split()[0] if right else ""
            if fstype in ("cgroup", "cgroup2"):
                mounts.append(Path(left.split()[4]))
    return mounts


def _is_unified_root(mount: Path) -> bool:
    return (mount / "cgroup.subtree_control").exists() and mount == Path("/sys/fs/cgroup")


def cgroup_create(name: str) -> None:
    """``/<name>`` and ``/<name>/node`` in every hierarchy, ready to take processes."""
    for mount in cgroup_mounts():
        top = mount / name
        (top / "node").mkdir(parents=True, exist_ok=True)
        if (mount / "cpuset.cpus").exists():  # v1 cpuset: a child starts with no CPUs
            for d in (top, top / "node"):
                for knob in ("cpuset.cpus", "cpuset.mems"):
                    value = (mount / knob).read_text().strip()
                    if not (d / knob).read_text().strip():
                        (d / knob).write_text(value)
        if _is_unified_root(mount):  # pure cgroup v2: hand the controllers down
            wanted = (mount / "cgroup.controllers").read_text().split()
            for d in (mount, top):
                with contextlib.suppress(OSError):
                    (d / "cgroup.subtree_control").write_text(" ".join("+" + c for c in wanted))


def cgroup_join(name: str) -> None:
    """Move the calling process into ``/<name>/node`` of every hierarchy."""
    for mount in cgroup_mounts():
        procs = mount / name / "node" / "cgroup.procs"
        with open(procs, "w") as f:
            f.write("0")


def cgroup_pids(name: str) -> set[int]:
    pids: set[int] = set()
    for mount in cgroup_mounts():
        top = mount / name
        for dirpath, _, filenames in os.walk(top):
            if "cgroup.procs" in filenames:
                with contextlib.suppress(OSError):
                    pids.update(int(p) for p in Path(dirpath, "cgroup.procs").read_text().split())
    return pids


def cgroup_kill(name: str, timeout: float = 20.0) -> set[int]:
    """SIGKILL every process below ``/<name>`` until none is left; return the survivors."""
    deadline = time.monotonic() + timeout
    pids = cgroup_pids(name)
    while pids and time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)
        pids = {p for p in cgroup_pids(name) if not dc.proc_is_zombie(p)}
    return pids


def cgroup_remove(name: str, timeout: float = 10.0) -> list[str]:
    """Remove ``/<name>`` from every hierarchy, deepest first; return what stayed."""
    left = []
    for mount in cgroup_mounts():
        top = mount / name
        if not top.exists():
            continue
        deadline = time.monotonic() + timeout
        while True:
            for dirpath, _, _ in sorted(os.walk(top, topdown=False), key=lambda w: -len(w[0])):
                with contextlib.suppress(OSError):
                    os.rmdir(dirpath)
            if not top.exists() or time.monotonic() > deadline:
                break
            time.sleep(0.2)  # a cgroup is busy for a moment after its last process exits
        if top.exists():
            left.append(str(top))
    return left


# --------------------------------------------------------------------------------------
# the node's mount namespace (component "node-ns")
# --------------------------------------------------------------------------------------


def node_dir(root: Path) -> Path:
    return root / "node"


def cmd_node_ns(args) -> int:
    """Run inside ``unshare --mount``: set up the binds, then hold the namespace open."""
    nd = node_dir(Path(args.state_dir))
    for src, dst in NS_BINDS.items():
        _mount_bind(nd / src, dst)
    for key in KUBELET_SYSCTLS:
        _mount_bind(nd / "sysctl" / key.replace("/", "."), f"/proc/sys/{key}")
    (nd / "ns-ready").write_text(str(os.getpid()))
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    while True:
        signal.pause()


def _mount_bind(src: Path, dst: str) -> None:
    r = subprocess.run(
        ["mount", "--bind", str(src), dst], capture_output=True, text=True, check=False
    )
    if r.returncode != 0:
        raise SystemExit(f"mount --bind {src} {dst} failed: {r.stderr.strip()}")


def ns_path(holder_pid: int, path: str) -> str:
    """A path inside the node's mount namespace, as the host can open it."""
    return f"/proc/{holder_pid}/root{path}"


# --------------------------------------------------------------------------------------
# configuration files
# --------------------------------------------------------------------------------------


def containerd_config(nd: Path, pause_ref: str) -> str:
    registry = nd / "registry"
    (registry / "_default").mkdir(parents=True, exist_ok=True)
    (registry / "_default" / "hosts.toml").write_text(f'server = "{DEAD_REGISTRY}"\n')
    disabled = [
        "io.containerd.nri.v1.nri",
        "io.containerd.snapshotter.v1.btrfs",
        "io.containerd.snapshotter.v1.zfs",
        "io.containerd.snapshotter.v1.devmapper",
        "io.containerd.snapshotter.v1.blockfile",
        "io.containerd.snapshotter.v1.erofs",
        "io.containerd.differ.v1.erofs",
        "io.containerd.mount-handler.v1.erofs",
        "io.containerd.tracing.processor.v1.otlp",
        "io.containerd.internal.v1.tracing",
    ]
    q = json.dumps  # TOML basic strings and arrays of them are JSON-compatible
    return f"""# written by tests/cluster/devcluster.py: the real node's containerd
version = 4
root = "/var/lib/containerd"
state = "/run/containerd"
temp = {q(str(nd / "tmp"))}
imports = []
disabled_plugins = {q(disabled)}

[plugins."io.containerd.server.v1.grpc"]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.server.v1.ttrpc"]
  address = "/run/containerd/containerd.sock.ttrpc"
[plugins."io.containerd.server.v1.metrics"]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "/var/lib/containerd-opt"
[plugins."io.containerd.image-verifier.v1.bindir"]
  bin_dir = "/var/lib/containerd-image-verifier"
[plugins."io.containerd.transfer.v1.local"]
  config_path = {q(str(registry))}
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = {q(pause_ref)}
  [plugins."io.containerd.cri.v1.images".registry]
    config_path = {q(str(registry))}
[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  enable_criu = false
  cdi_spec_dirs = []
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = {q(RUNC)}
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [{q(CNI_BIN)}]
    conf_dir = {q(str(nd / "cni"))}
    max_conf_num = 1
[plugins."io.containerd.grpc.v1.cri"]
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
"""


def cni_config(nd: Path, net: dict) -> dict:
    return {
        "cniVersion": "1.0.0",
        "name": "devcluster",
        "plugins": [
            {
                "type": "bridge",
                "bridge": net["bridge"],
                # the bridge is ours and carries the node IP: no gateway set-up by the
                # plugin (that would turn on ip_forward host-wide), no masquerading
                "isGateway": False,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [
                        [
                            {
                                "subnet": net["subnet"],
                                "rangeStart": net["range_start"],
                                "rangeEnd": net["range_end"],
                                "gateway": net["node_ip"],
                            }
                        ]
                    ],
                    "dataDir": str(nd / "cni-ipam"),
                },
            },
        ],
    }


def corefile(net: dict, kubeconfig: Path, ports: dict) -> str:
    ip = net["node_ip"]
    return f"""# written by tests/cluster/devcluster.py: cluster DNS of the real node's pods
{CLUSTER_DOMAIN}:53 {{
    bind {ip}
    errors
    kubernetes {CLUSTER_DOMAIN} {{
        kubeconfig {kubeconfig}
        pods insecure
        ttl 5
    }}
}}
.:53 {{
    bind {ip}
    health 127.0.0.1:{ports["coredns-health"]}
    ready 127.0.0.1:{ports["coredns-ready"]}
    errors
    # nothing leaves the machine: every other name does not exist
    template ANY ANY {{
        rcode NXDOMAIN
    }}
}}
"""


def kubelet_config(nd: Path, net: dict, ports: dict, pki: Path) -> dict:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": net["node_ip"],
        "port": ports["kubelet-real"],
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": ports["kubelet-healthz"],
        "tlsCertFile": str(pki / "real-kubelet.crt"),
        "tlsPrivateKeyFile": str(pki / "real-kubelet.key"),
        "rotateCertificates": False,
        "serverTLSBootstrap": False,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(pki / "ca.crt")},
        },
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": "/" + net["cgroup"],
        "cgroupsPerQOS": True,
        "enforceNodeAllocatable": ["pods"],
        "failCgroupV1": False,
        "failSwapOn": False,
        # no iptables rules on the host (KUBE-FIREWALL, canary chains)
        "makeIPTablesUtilChains": False,
        # never write kernel tunables: they are shown to the kubelet as set (see above)
        "protectKernelDefaults": True,
        "oomScoreAdj": 0,
        "clusterDNS": [net["node_ip"]],
        "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": str(nd / "resolv.conf"),
        "podLogsDir": "/var/log/pods",
        "registerNode": True,
        "registerWithTaints": [NODE_TAINT],
        "maxPods": 40,
        "serializeImagePulls": False,
        # the images are imported at `up`, never pulled: never garbage-collect them
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "200Mi",
            "nodefs.available": "1%",
            "nodefs.inodesFree": "1%",
            "imagefs.available": "1%",
        },
        "shutdownGracePeriod": "0s",
        "nodeStatusReportFrequency": "10s",
        "syncFrequency": "10s",
        "staticPodPath": "",
        "localStorageCapacityIsolation": True,
    }


RBAC = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRoleBinding",
    "metadata": {
        "name": "devcluster:real-node",
        "labels": {"app.kubernetes.io/managed-by": "devcluster"},
    },
    # the API server runs RBAC without the Node authorizer: the node identity (group
    # system:nodes) gets the kubelet's ClusterRole
    "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "system:node",
    },
    "subjects": [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}
    ],
}


# --------------------------------------------------------------------------------------
# up
# --------------------------------------------------------------------------------------


def plan(st: dc.State) -> dict:
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


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def start(st: dc.State, node_bin: Path, images: dict, ports: dict, *, env: dict, watched: dict):
    """Start the node (after the API server is up); return a function that waits for it."""
    root = st.root
    pki = root / "pki"
    nd = node_dir(root)
    t = time.monotonic()
    net = plan(st)
    for sub in ("tmp", "cni", "cni-ipam", "sysctl", "shared", *NS_BINDS):
        (nd / sub).mkdir(parents=True, exist_ok=True)
    for key, value in KUBELET_SYSCTLS.items():
        (nd / "sysctl" / key.replace("/", ".")).write_text(value + "\n")
    (nd / "resolv.conf").write_text(f"nameserver {net['node_ip']}\n")
    (nd / "containerd.toml").write_text(containerd_config(nd, images["pause"]["ref"]))
    (nd / "cni" / "10-devcluster.conflist").write_text(json.dumps(cni_config(nd, net), indent=2))
    (nd / "Corefile").write_text(corefile(net, root / "kubeconfig", ports))
    node_ip = net["node_ip"]
    dc.make_leaf(
        pki,
        "real-kubelet",
        f"/CN={NODE_NAME}",
        "serverAuth",
        f"IP:{node_ip},IP:127.0.0.1,DNS:{NODE_NAME}",
    )
    dc.make_leaf(pki, "real-node", f"/O=system:nodes/CN=system:node:{NODE_NAME}", "clientAuth")
    dc.write_kubeconfig(
        nd / "kubelet.kubeconfig", st.data["server"], pki, user=NODE_NAME, cert="real-node"
    )
    (nd / "kubelet.json").write_text(json.dumps(kubelet_config(nd, net, ports, pki), indent=2))
    cgroup = net["cgroup"]

    def in_cgroup() -> None:
        cgroup_join(cgroup)

    node_env = dict(
        env,
        PATH=f"{node_bin}:/usr/sbin:/usr/bin:/sbin:/bin",
        TMPDIR=str(nd / "tmp"),
    )
    me = str(Path(dc.__file__).resolve())
    p_ns = dc.start_process(
        st,
        "node-ns",
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            sys.executable,
            me,
            "node-ns",
            "--state-dir",
            str(root),
        ],
        env=node_env,
        preexec=in_cgroup,
    )
    watched["node-ns"] = (p_ns, st.components["node-ns"]["log"])
    dc.wait_until("node mount namespace", (nd / "ns-ready").exists, 20, watched, 0.05)
    holder = p_ns.pid
    enter = ["nsenter", f"--mount=/proc/{holder}/ns/mnt", "--"]
    sock = ns_path(holder, "/run/containerd/containerd.sock")
    p_ctd = dc.start_process(
        st,
        "containerd",
        [*enter, str(node_bin / "containerd"), "--config", str(nd / "containerd.toml")],
        env=node_env,
        health={"unix": sock},
        preexec=in_cgroup,
    )
    watched["containerd"] = (p_ctd, st.components["containerd"]["log"])
    ctr = [str(node_bin / "ctr"), "--address", sock, "--namespace", "k8s.io"]
    dc.wait_until(
        "containerd socket",
        lambda: subprocess.run([*ctr, "version"], capture_output=True, check=False).returncode == 0,
        30,
        watched,
        0.1,
    )
    dc.log(f"real node: containerd ready ({time.monotonic() - t:.1f}s)")
    p_dns = dc.start_process(
        st,
        "coredns",
        [str(node_bin / "coredns"), "-conf", str(nd / "Corefile")],
        env=node_env,
        health={"url": f"http://127.0.0.1:{ports['coredns-ready']}/ready"},
        preexec=in_cgroup,
    )
    watched["coredns"] = (p_dns, st.components["coredns"]["log"])
    # Small images first and at once (the sandbox image is needed by every pod); the big
    # ones import in the background while the rest of the cluster gets ready.
    by_size = sorted(images.values(), key=lambda i: i["size"])
    small = [i for i in by_size if i["size"] < BACKGROUND_IMPORT_BYTES]
    for image in small:
        wait_import(start_import(ctr, image, nd), watched)
    importing = [start_import(ctr, i, nd) for i in by_size if i not in small]
    kube = dc.Kube(st.data["server"], pki)
    code, body = kube.request(
        "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", RBAC
    )
    if code not in (200, 201, 409):
        raise RuntimeError(f"creating the node's ClusterRoleBinding failed: {code} {body}")
    p_kubelet = dc.start_process(
        st,
        "kubelet",
        [
            *enter,
            str(node_bin / "kubelet"),
            f"--config={nd / 'kubelet.json'}",
            f"--kubeconfig={nd / 'kubelet.kubeconfig'}",
            f"--hostname-override={NODE_NAME}",
            f"--node-ip={node_ip}",
            f"--node-labels={NODE_LABEL}=true",
            "--root-dir=/var/lib/kubelet",
            "--v=1",
        ],
        env=node_env,
        health={"url": f"http://127.0.0.1:{ports['kubelet-healthz']}/healthz"},
        preexec=in_cgroup,
    )
    watched["kubelet"] = (p_kubelet, st.components["kubelet"]["log"])

    def wait() -> None:
        for job in importing:
            wait_import(job, watched)
        dc.wait_until("real node Ready", lambda: node_ready(kube), 90, watched, 0.2)
        dc.wait_until(
            "CoreDNS ready",
            lambda: dc.http_ok(f"http://127.0.0.1:{ports['coredns-ready']}/ready")[0],
            60,
            watched,
            0.2,
        )
        dc.log(
            f"real node {NODE_NAME} Ready: {node_ip} on {net['bridge']}, pods in "
            f"{net['subnet']}, DNS {node_ip}:53 ({time.monotonic() - t:.1f}s)"
        )

    return wait


def start_import(ctr: list[str], image: dict, nd: Path) -> dict:
    """``ctr images import`` of one archive, as a child process."""
    log = nd / f"import-{image['name']}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [*ctr, "images", "import", "--local", str(image["archive"])],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    return {"image": image, "proc": proc, "log": log, "t": time.monotonic()}


def wait_import(job: dict, watched: dict, timeout: float = 300) -> None:
    image, proc = job["image"], job["proc"]
    try:
        dc.wait_until(
            f"import of {image['ref']}", lambda: proc.poll() is not None, timeout, watched
        )
    finally:
        if proc.poll() is None:
            proc.kill()
    if proc.returncode != 0:
        raise RuntimeError(
            f"importing image {image['ref']} failed: {dc.log_tail(str(job['log']), 20)}"
        )
    dc.log(
        f"real node: image {image['ref']} imported "
        f"({image['size'] / 1e6:.0f} MB, {time.monotonic() - job['t']:.1f}s)"
    )


def node_ready(kube: dc.Kube) -> bool:
    code, node = kube.get(f"/api/v1/nodes/{NODE_NAME}")
    if code != 200:
        return False
    return any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in node.get("status", {}).get("conditions", [])
    )


def unix_socket_ok(path: str) -> tuple[bool, str]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect(path)
        return True, "socket accepts connections"
    except OSError as e:
        return False, f"{path}: {e}"
    finally:
        s.close()


def health_row(root: Path, st: dc.State) -> tuple[str, bool, str] | None:
    rn = st.data.get("real_node")
    if not rn or not (root / "pki" / "admin.crt").exists():
        return None
    try:
        kube = dc.Kube(st.data["server"], root / "pki")
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


def cleanup(st: dc.State, quiet: bool) -> list[str]:
    """Remove everything the real node created; return what could not be removed."""
    rn = st.data.get("real_node")
    if not rn:
        return []
    problems: list[str] = []
    survivors = cgroup_kill(rn["cgroup"])
    if survivors:
        problems.append(f"processes in cgroup /{rn['cgroup']} survived SIGKILL: {survivors}")
    problems += [f"cgroup {c} could not be removed" for c in cgroup_remove(rn["cgroup"])]
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
            dc.log(
                f"real node removed: bridge {rn['bridge']}, cgroups /{rn['cgroup']}, "
                f"{nd} (no mounts, no processes left)"
            )
    return problems


def mounts_below(path: Path) -> list[str]:
    prefix = str(path).rstrip("/") + "/"
    found = []
    with contextlib.suppress(OSError), open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].replace("\\040", " ")
            if point == str(path) or point.startswith(prefix):
                found.append(point)
    return sorted(found, key=len, reverse=True)
