"""The control plane: etcd, the token webhook, kube-apiserver, kube-controller-manager,
kube-scheduler, the fake nodes with kwok, and our log server (their "kubelet" port)."""

from __future__ import annotations

import os
import shlex
import sys

from . import auth
from .common import ENTRY, STAGES_FILE, log
from .kube import Kube, check_health, http_ok
from .procs import Launch

ZONE_LABEL = "topology.kubernetes.io/zone"


SLICE_LABEL = "devcluster/slice"


NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"


NODE_COUNT = 8


ZONES = ["zone-a", "zone-b"]


SLICES = ["slice-0", "slice-1", "slice-2", "slice-3"]


#: Only pods that tolerate this taint land on the exclusive-placement turn's nodes.
TURN_TAINT = {"key": "devcluster/exclusive-turn", "value": "true", "effect": "NoSchedule"}


#: The exclusive-placement turn's nodes (devcluster-node-8, -9), each a zone and a slice of its
#: own, tainted (:data:`TURN_TAINT`). An exclusively placed Job needs a domain without any
#: other JobSet's pod; on a busy suite every other test's pods, spread by the scheduler, may
#: hold every domain of the eight nodes for minutes (a CI run's exclusive tests timed out at
#: 90 s so). These two hold no pod but those of the test whose turn it is.
TURN_DOMAINS = [("zone-turn-0", "slice-turn-0"), ("zone-turn-1", "slice-turn-1")]


#: Every fake node: the eight, then the turn's.
FAKE_NODE_COUNT = NODE_COUNT + len(TURN_DOMAINS)


# Kube-controller-manager controllers (canonical names, k8s >= 1.30).
KCM_CONTROLLERS = [
    "job-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "ttl-after-finished-controller",
    "pod-garbage-collector-controller",
    "serviceaccount-controller",
    "root-ca-certificate-publisher-controller",
    "cronjob-controller",
    "replicaset-controller",
    "deployment-controller",
    "endpointslice-controller",
    "disruption-controller",
    "resourcequota-controller",
]


def start_etcd(up: Launch) -> str:
    """etcd on two free loopback ports (plain HTTP); return its client URL once healthy."""
    ports = up.ports
    etcd_url = f"http://127.0.0.1:{ports['etcd']}"
    peer_url = f"http://127.0.0.1:{ports['etcd-peer']}"
    up.start(
        "etcd",
        [
            up.bin("etcd"),
            "--name=devcluster",
            f"--data-dir={up.root / 'etcd-data'}",
            f"--listen-client-urls={etcd_url}",
            f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=devcluster={peer_url}",
            "--unsafe-no-fsync=true",
            "--auto-compaction-retention=1",
            "--quota-backend-bytes=4294967296",
            "--log-level=warn",
        ],
        health={"url": etcd_url + "/health"},
    )
    up.wait("etcd /health", lambda: http_ok(etcd_url + "/health")[0], 30)
    log(f"etcd ready on {etcd_url}")
    return etcd_url


def start_authn(up: Launch) -> None:
    """The token webhook of the short-lived credentials (``auth.py``), asked by the
    apiserver about bearer tokens that no other authenticator accepted."""
    root, port = up.root, up.ports["authn"]
    auth.prepare(root, port)
    up.start(
        "authn",
        [sys.executable, str(auth.HERE), "serve", "--state-dir", str(root), "--port", str(port)],
        health={"url": f"https://127.0.0.1:{port}/healthz", "tls": "ca"},
    )
    up.wait("token webhook /healthz", lambda: check_health(root, up.st.components["authn"])[0], 30)


def apiserver_args(up: Launch, etcd_url: str) -> list[str]:
    root, pki = up.root, up.pki
    return [
        up.bin("kube-apiserver"),
        f"--etcd-servers={etcd_url}",
        "--bind-address=127.0.0.1",
        f"--secure-port={up.ports['apiserver']}",
        "--advertise-address=127.0.0.1",
        "--endpoint-reconciler-type=none",
        f"--tls-cert-file={pki / 'apiserver.crt'}",
        f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--client-ca-file={pki / 'ca.crt'}",
        "--authorization-mode=RBAC",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={pki / 'sa.pub'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        "--service-cluster-ip-range=10.96.0.0/16",
        "--allow-privileged=true",
        # No node-lifecycle controller runs, so nothing would remove the not-ready taint.
        "--disable-admission-plugins=TaintNodesByCondition",
        f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
        f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
        f"--kubelet-certificate-authority={pki / 'ca.crt'}",
        "--kubelet-preferred-address-types=InternalIP",
        # front-proxy (aggregation) identity; also lets KCM/scheduler load the
        # requestheader CA instead of logging errors about it
        f"--requestheader-client-ca-file={pki / 'ca.crt'}",
        "--requestheader-allowed-names=front-proxy-client",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--proxy-client-cert-file={pki / 'front-proxy-client.crt'}",
        f"--proxy-client-key-file={pki / 'front-proxy-client.key'}",
        "--enable-priority-and-fairness=false",
        "--max-requests-inflight=1000",
        "--max-mutating-requests-inflight=500",
        "--profiling=false",
        f"--cert-dir={root / 'apiserver-certs'}",
        *auth.apiserver_flags(root),
        # Extra flags, e.g. the benchmarks' audit log and short watch timeout (off by
        # default): `{state}` stands for the state directory.
        *shlex.split(os.environ.get("DEVCLUSTER_APISERVER_ARGS", "").replace("{state}", str(root))),
    ]


def start_apiserver(up: Launch, etcd_url: str) -> Kube:
    """kube-apiserver; return the admin client once /readyz answers."""
    server = up.st.data["server"]
    up.start(
        "kube-apiserver",
        apiserver_args(up, etcd_url),
        health={"url": server + "/readyz", "tls": "admin"},
    )
    kube = Kube(server, up.pki)
    up.wait("kube-apiserver /readyz", lambda: kube.get("/readyz", timeout=2)[0] == 200, 90, 0.3)
    log(f"kube-apiserver ready on {server} ({up.elapsed()})")
    up.kube = kube
    return kube


def start_kcm_and_scheduler(up: Launch) -> None:
    kubeconfig, ports = up.kubeconfig, up.ports
    common = [
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--leader-elect=false",
        "--bind-address=127.0.0.1",
    ]
    up.start(
        "kube-controller-manager",
        [
            up.bin("kube-controller-manager"),
            *common,
            f"--secure-port={ports['kcm']}",
            f"--cert-dir={up.root / 'kcm-certs'}",
            "--controllers=" + ",".join(KCM_CONTROLLERS),
            f"--root-ca-file={up.pki / 'ca.crt'}",
            "--use-service-account-credentials=false",
            "--kube-api-qps=200",
            "--kube-api-burst=400",
            "--cluster-name=devcluster",
            "--profiling=false",
        ],
        health={"url": f"https://127.0.0.1:{ports['kcm']}/healthz", "tls": "insecure"},
    )
    up.start(
        "kube-scheduler",
        [
            up.bin("kube-scheduler"),
            *common,
            f"--secure-port={ports['scheduler']}",
            f"--cert-dir={up.root / 'scheduler-certs'}",
            "--kube-api-qps=200",
            "--kube-api-burst=400",
            "--profiling=false",
        ],
        health={"url": f"https://127.0.0.1:{ports['scheduler']}/healthz", "tls": "insecure"},
    )


def start_logserver(up: Launch) -> None:
    """The log server: the "kubelet" endpoint of every fake node, for pods/log."""
    port = up.ports["kubelet"]
    up.start(
        "logserver",
        [sys.executable, str(ENTRY), "logserver", "--state-dir", str(up.root), "--port", str(port)],
        health={"url": f"https://127.0.0.1:{port}/healthz", "tls": "ca"},
    )


def node_objects() -> list[dict]:
    nodes = []
    for i in range(FAKE_NODE_COUNT):
        turn = i >= NODE_COUNT
        if turn:
            zone, sl = TURN_DOMAINS[i - NODE_COUNT]
        else:
            zone = ZONES[i * len(ZONES) // NODE_COUNT]
            sl = SLICES[i * len(SLICES) // NODE_COUNT]
        name = f"devcluster-node-{i}"
        res = {
            "cpu": "32",
            "memory": "128Gi",
            "pods": os.environ.get("DEVCLUSTER_NODE_PODS") or "110",
            "ephemeral-storage": "500Gi",
            "nvidia.com/gpu": "8",
        }
        nodes.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "annotations": {
                        "kwok.x-k8s.io/node": "fake",
                        "node.alpha.kubernetes.io/ttl": "0",
                    },
                    "labels": {
                        "kubernetes.io/hostname": name,
                        "kubernetes.io/os": "linux",
                        "kubernetes.io/arch": "amd64",
                        "type": "kwok",
                        "node.kubernetes.io/instance-type": "devcluster-fake",
                        ZONE_LABEL: zone,
                        "topology.kubernetes.io/region": "devcluster",
                        SLICE_LABEL: sl,
                        NODEPOOL_LABEL: sl,
                    },
                },
                "spec": {"taints": [TURN_TAINT]} if turn else {},
                "status": {"capacity": res, "allocatable": res},
            }
        )
    return nodes


def start_kwok(up: Launch) -> None:
    """Create the fake nodes, then start kwok, which plays their kubelet."""
    for node in node_objects():
        code, body = up.kube.request("POST", "/api/v1/nodes", node)
        if code not in (200, 201):
            raise RuntimeError(f"creating node {node['metadata']['name']} failed: {code} {body}")
    ports = up.ports
    up.start(
        "kwok",
        [
            up.bin("kwok"),
            f"--kubeconfig={up.kubeconfig}",
            f"--config={STAGES_FILE}",
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            "--node-ip=127.0.0.1",
            f"--node-port={ports['kubelet']}",
            f"--server-address=127.0.0.1:{ports['kwok']}",
            "--cidr=10.244.0.0/16",
            "--node-lease-duration-seconds=40",
        ],
        health={"url": f"http://127.0.0.1:{ports['kwok']}/healthz"},
    )


def fake_nodes_ready(kube: Kube) -> int:
    """How many of the fake nodes are Ready."""
    code, nodes = kube.get("/api/v1/nodes?labelSelector=devcluster%2Fslice")
    if code != 200:
        return 0
    return sum(
        1
        for n in nodes.get("items", [])
        for c in n.get("status", {}).get("conditions", [])
        if c["type"] == "Ready" and c["status"] == "True"
    )


def wait_fake_nodes(up: Launch) -> None:
    up.wait("fake nodes Ready", lambda: fake_nodes_ready(up.kube) >= FAKE_NODE_COUNT, 60)
    log(f"{FAKE_NODE_COUNT} kwok nodes Ready ({up.elapsed()})")


def wait_healthy(up: Launch) -> None:
    """The components nobody waited for yet, and the default ServiceAccount."""
    for name in ("kube-controller-manager", "kube-scheduler", "logserver", "kwok"):
        c = up.st.components[name]
        up.wait(f"{name} health", lambda c=c: check_health(up.root, c)[0], 60, 0.3)
    up.wait(
        "default ServiceAccount",
        lambda: up.kube.get("/api/v1/namespaces/default/serviceaccounts/default")[0] == 200,
        30,
    )
