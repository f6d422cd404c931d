"""What the real node takes from the host, and gives back at ``down``: the Debian packages
it needs, one /24 of 198.18.0.0/15 with its bridge, cgroups in every hierarchy, the mounts
below its folder. Every name here is recorded in ``state.json`` before it is created (see
``node.py``)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import ipaddress
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from .common import cache_root, die, log
from .procs import proc_is_zombie

POD_RANGE = ipaddress.ip_network("198.18.0.0/15")


RANGES = POD_RANGE.num_addresses // 256  # 512 ranges of /24


BRIDGE_PREFIX = "dcbr-"


CGROUP_PREFIX = "devcluster-"


RUNC = "/usr/sbin/runc"


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
    "iptables": "/usr/sbin/iptables",
}


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
            log("real-node packages are installed (" + ", ".join(SETUP_PACKAGES) + ")")
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        die(
            "the real node needs these Debian packages: "
            + " ".join(missing)
            + " (apt-get install --no-install-recommends ...; or DEVCLUSTER_REAL_NODE=0)"
        )
    log(f"installing Debian packages: {' '.join(missing)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing]
    t = time.monotonic()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        # a brand-new machine may have no package lists yet
        subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, check=False)
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if r.returncode != 0 or missing_packages():
        die(f"apt-get install {' '.join(missing)} failed:\n{r.stdout[-2000:]}{r.stderr}")
    log(f"installed {' '.join(missing)} ({time.monotonic() - t:.0f}s)")


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
    locks = cache_root().parent / "locks"
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


#: The ``kubernetes`` Service's ClusterIP: the first address of the API server's
#: ``--service-cluster-ip-range`` (its certificate names it). Kubelets give it to every pod as
#: ``KUBERNETES_SERVICE_HOST``, and in-cluster clients connect to it.
SERVICE_IP = "10.96.0.1"


def service_nat_rule(bridge: str, apiserver_port: int) -> list[str]:
    """The one rule that stands in for kube-proxy (nat table): a pod's connection to the
    ``kubernetes`` Service (``10.96.0.1:443``), arriving on this cluster's bridge, goes to the
    API server on loopback. Only that address and port, only from this bridge: two clusters'
    rules never meet, and nothing else is forwarded."""
    return [
        "PREROUTING",
        "-i",
        bridge,
        "-d",
        f"{SERVICE_IP}/32",
        "-p",
        "tcp",
        "--dport",
        "443",
        "-m",
        "comment",
        "--comment",
        f"devcluster {bridge}: the kubernetes Service",
        "-j",
        "DNAT",
        "--to-destination",
        f"127.0.0.1:{apiserver_port}",
    ]


def add_service_nat(bridge: str, rule: list[str]) -> None:
    """Install ``rule``; let the bridge route to loopback (``route_localnet``, a setting of
    this bridge alone, gone with it), which a DNAT to 127.0.0.1 needs."""
    Path(f"/proc/sys/net/ipv4/conf/{bridge}/route_localnet").write_text("1\n")
    r = subprocess.run(
        ["iptables", "-w", "-t", "nat", "-A", *rule], capture_output=True, text=True, check=False
    )
    if r.returncode != 0:
        raise RuntimeError(f"iptables -t nat -A {' '.join(rule)} failed: {r.stderr.strip()}")


def delete_service_nat(rule: list[str]) -> bool:
    """Remove every copy of ``rule``; False when one is left."""
    for _ in range(16):
        check, delete = (["iptables", "-w", "-t", "nat", flag, *rule] for flag in ("-C", "-D"))
        if subprocess.run(check, capture_output=True, check=False).returncode != 0:
            return True
        subprocess.run(delete, capture_output=True, check=False)
    return False


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
        pids = {p for p in cgroup_pids(name) if not proc_is_zombie(p)}
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
# mounts and host files
# --------------------------------------------------------------------------------------


def mounts_below(path: Path) -> list[str]:
    prefix = str(path).rstrip("/") + "/"
    found = []
    with contextlib.suppress(OSError), open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].replace("\\040", " ")
            if point == str(path) or point.startswith(prefix):
                found.append(point)
    return sorted(found, key=len, reverse=True)


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""
