"""The real node's configuration: its name, label and taint, its private mount namespace
(component ``node-ns``), and the files containerd, the CNI plugins, CoreDNS and the kubelet
read."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from .node_host import CNI_BIN, RUNC, SERVICE_IP

NODE_NAME = "devcluster-real-node"


NODE_LABEL = "devcluster/real-node"


#: Only pods that tolerate this taint (and select the label) land on the real node.
NODE_TAINT = {"key": NODE_LABEL, "value": "true", "effect": "NoSchedule"}


#: A closed loopback port: every registry resolves here, so a pull never leaves the machine
#: (and fails at once with "connection refused", which is what ErrImagePull tests want).
DEAD_REGISTRY = "http://127.0.0.1:9"


CLUSTER_DOMAIN = "cluster.local"


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
                    # The kubernetes Service's address goes to the node, where one NAT rule
                    # sends it on to the API server (node_host.service_nat_rule).
                    "routes": [{"dst": f"{SERVICE_IP}/32", "gw": net["node_ip"]}],
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
