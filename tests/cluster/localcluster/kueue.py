"""Kueue: its CRDs (read from the downloaded ``sigs.k8s.io/kueue`` module, never copied into
the repository), the manager as a local process with the JobSet integration, its webhooks
registered by URL, and the queues the cluster comes up with.

What the cluster holds (``DEVCLUSTER_KUEUE=0`` turns all of it off):

* ResourceFlavor :data:`FLAVOR` (no node labels: it fits every node);
* ClusterQueue :data:`CLUSTER_QUEUE` for every namespace, with the quota :data:`QUOTA` of the
  flavor and preemption within the ClusterQueue by priority (``LowerPriority``);
* WorkloadPriorityClasses :data:`LOW` (100) and :data:`HIGH` (1000);
* no LocalQueue: a test creates one in its own namespace (``tests/cluster/queues.py``). None is
  ever called ``default``: Kueue's LocalQueueDefaulting would queue every JobSet of that
  namespace.

Only labelled JobSets are Kueue's: ``manageJobsWithoutQueueName: false``, and Kueue's JobSet
webhooks only see JobSets with the label ``kueue.x-k8s.io/queue-name`` (objectSelector), so
a JobSet without it never depends on the Kueue process. Kueue's webhooks for other kinds
(batch Jobs, pods, Deployments, ...) are not registered, their integrations are off.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from .common import ENTRY, KUEUE_MOD, die, env_flag, log
from .gobuild import gomod_require, module_dir
from .jobset import probe_jobset
from .kube import (
    Kube,
    crd_established,
    create_webhooks,
    decode_manifests,
    http_ok,
    kubectl,
    url_webhooks,
)
from .pki import make_leaf
from .procs import Launch

#: The ports `up` picks for the Kueue manager.
PORT_NAMES = ["kueue-webhook", "kueue-health"]
CRDS = Path("config/components/crd/bases")
WEBHOOKS = Path("config/components/webhook/manifests.yaml")
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
API = "/apis/kueue.x-k8s.io/v1beta2"
NAMESPACE = "kueue-system"
FLAVOR = "devcluster-flavor"
CLUSTER_QUEUE = "devcluster-cq"
#: What the ClusterQueue admits at once (the fake nodes have far more: 8 x 32 CPUs).
QUOTA = {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "8"}
LOW, HIGH = "devcluster-low", "devcluster-high"
PRIORITIES = {LOW: 100, HIGH: 1000}
#: The API groups whose webhooks are registered: Kueue's own objects and JobSets.
GROUPS = ("kueue.x-k8s.io", "jobset.x-k8s.io")


def enabled() -> bool:
    """``DEVCLUSTER_KUEUE=0`` (or false/no/off) turns Kueue off; so does
    ``DEVCLUSTER_JOBSET=0`` (JobSet is the only integration here)."""
    return env_flag("DEVCLUSTER_KUEUE") and env_flag("DEVCLUSTER_JOBSET")


def version() -> str:
    return gomod_require(KUEUE_MOD / "go.mod", "sigs.k8s.io/kueue")


def kueue_dir(bin_dir: Path) -> Path:
    """The Kueue module the binary was built from (its manifests are read from there)."""
    manifest = json.loads((bin_dir / "manifest.json").read_text())
    mod = Path(manifest.get("kueue_module_dir", ""))
    if not (mod / WEBHOOKS).exists():
        mod = module_dir("sigs.k8s.io/kueue", KUEUE_MOD)
    return mod


def install_crds(up: Launch, mod: Path) -> None:
    """Server-side apply every upstream CRD (no conversion webhook: clients read v1beta2, the
    storage version) and the manager's namespace."""
    files = sorted(str(p) for p in (mod / CRDS).glob("*.yaml"))
    args = ["apply", "--server-side", "--force-conflicts", "--field-manager=devcluster"]
    for f in files:
        kubectl(up.bin_dir, up.root, *args, "-f", f)
    up.wait(
        "Kueue CRDs Established",
        lambda: all(
            crd_established(up.kube, f"{p}.kueue.x-k8s.io")
            for p in ("clusterqueues", "localqueues", "workloads", "resourceflavors")
        ),
        30,
    )
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    code, body = up.kube.request("POST", "/api/v1/namespaces", ns)
    if code not in (200, 201, 409):
        raise RuntimeError(f"creating namespace {NAMESPACE} failed: {code} {body}")


def config(up: Launch, certdir: Path) -> dict:
    ports = up.ports
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "manageJobsWithoutQueueName": False,
        "webhook": {"host": "127.0.0.1", "port": ports["kueue-webhook"], "certDir": str(certdir)},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{ports['kueue-health']}"},
        "metrics": {"bindAddress": "0"},
        "clientConnection": {"qps": 200, "burst": 300},
        "integrations": {"frameworks": ["jobset.x-k8s.io/jobset"]},
        # The visibility server reads its certificate from /visibility (a fixed host path)
        # when the internal certificates are off: not served here.
        "featureGates": {"VisibilityOnDemand": False},
    }


def start_manager(up: Launch, kueue_bin: Path) -> None:
    """The manager with a generated configuration and a webhook certificate of our CA.

    Kueue v0.17 loads a metrics certificate from the fixed path ``/etc/kueue/metrics/certs``
    whenever its internal certificates are off (even with metrics off; ``cmd/kueue/main.go``).
    So it runs in a private mount namespace (``unshare --mount``) whose ``/etc`` is a read-only
    overlay of the host's ``/etc`` and ``<state>/kueue/etc`` (``kueue-exec``): the host's
    ``/etc`` never changes, and the mount goes away with the process."""
    if os.geteuid() != 0:
        die(
            "Kueue runs in a private mount namespace, which needs root (Kueue v0.17 reads a "
            "certificate from /etc/kueue/metrics/certs); DEVCLUSTER_KUEUE=0 turns Kueue off"
        )
    kdir = up.root / "kueue"
    certdir = kdir / "certs"
    metrics = kdir / "etc" / "kueue" / "metrics" / "certs"
    for d in (certdir, metrics):
        d.mkdir(parents=True)
    make_leaf(
        up.pki, "kueue-webhook", "/CN=kueue-webhook", "serverAuth", "IP:127.0.0.1,DNS:localhost"
    )
    for d in (certdir, metrics):  # metrics are off: the second copy is only loaded
        shutil.copy(up.pki / "kueue-webhook.crt", d / "tls.crt")
        shutil.copy(up.pki / "kueue-webhook.key", d / "tls.key")
    (kdir / "config.yaml").write_text(json.dumps(config(up, certdir), indent=2))
    up.start(
        "kueue",
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            sys.executable,
            str(ENTRY),
            "kueue-exec",
            "--state-dir",
            str(up.root),
            "--",
            str(kueue_bin / "kueue"),
            f"--config={kdir / 'config.yaml'}",
            f"--kubeconfig={up.kubeconfig}",
            "--zap-log-level=info",
        ],
        health={"url": f"http://127.0.0.1:{up.ports['kueue-health']}/readyz"},
    )


def cmd_kueue_exec(args) -> int:
    """Inside ``unshare --mount``: lay ``<state>/kueue/etc`` over ``/etc`` (read-only
    overlay), then become the Kueue manager."""
    extra = Path(args.state_dir) / "kueue" / "etc"
    r = subprocess.run(
        ["mount", "-t", "overlay", "overlay", "-o", f"lowerdir={extra}:/etc", "/etc"],
        capture_output=True,
        text=True,
        check=False,
    )
    if r.returncode != 0:
        raise SystemExit(f"mounting the overlay on /etc failed: {r.stderr.strip()}")
    argv = [a for a in args.argv if a != "--"]
    os.execv(argv[0], argv)
    return 1


def webhook_configs(bin_dir: Path, root: Path, mod: Path, port: int) -> list[dict]:
    """Upstream's webhooks for Kueue's objects and JobSets, by URL; the JobSet ones see only
    JobSets with a queue-name label."""
    result = url_webhooks(
        decode_manifests(bin_dir, root, mod / WEBHOOKS), root, "devcluster-kueue", port
    )
    for obj in result:
        obj["webhooks"] = [
            wh
            for wh in obj["webhooks"]
            if any(g in GROUPS for r in wh.get("rules", []) for g in r.get("apiGroups", []))
        ]
        for wh in obj["webhooks"]:
            if any("jobset.x-k8s.io" in r.get("apiGroups", []) for r in wh["rules"]):
                wh["objectSelector"] = {
                    "matchExpressions": [{"key": QUEUE_LABEL, "operator": "Exists"}]
                }
    if len(result) != 2 or not all(obj["webhooks"] for obj in result):
        raise RuntimeError(f"unexpected webhook manifests in {mod / WEBHOOKS}")
    return result


PROBE = probe_jobset("devcluster-kueue-probe", {QUEUE_LABEL: "devcluster-probe"})


def webhook_works(kube: Kube) -> bool:
    """Whether Kueue's JobSet webhook answers (a server-side dry-run create of a queued
    JobSet comes back suspended)."""
    code, body = kube.request(
        "POST", "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets?dryRun=All", PROBE
    )
    return code == 201 and isinstance(body, dict) and body.get("spec", {}).get("suspend") is True


def queue_objects() -> list[tuple[str, dict]]:
    """(collection path, object) of the flavor, the ClusterQueue, the priority classes."""
    flavor = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": FLAVOR},
    }
    resources = [{"name": name, "nominalQuota": q} for name, q in QUOTA.items()]
    cq = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": CLUSTER_QUEUE},
        "spec": {
            "namespaceSelector": {},
            "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": [
                {
                    "coveredResources": list(QUOTA),
                    "flavors": [{"name": FLAVOR, "resources": resources}],
                }
            ],
            "preemption": {"withinClusterQueue": "LowerPriority"},
        },
    }
    objs = [(f"{API}/resourceflavors", flavor), (f"{API}/clusterqueues", cq)]
    for name, value in PRIORITIES.items():
        wpc = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": name},
            "value": value,
            "description": f"devcluster: {name.rsplit('-', 1)[1]} priority (preemption tests)",
        }
        objs.append((f"{API}/workloadpriorityclasses", wpc))
    return objs


def cluster_queue_active(kube: Kube) -> bool:
    code, cq = kube.get(f"{API}/clusterqueues/{CLUSTER_QUEUE}")
    return code == 200 and any(
        c["type"] == "Active" and c["status"] == "True"
        for c in cq.get("status", {}).get("conditions", [])
    )


def finish(up: Launch, mod: Path) -> None:
    """Wait for the manager, register its webhooks, create the queues, wait until the
    webhooks answer and the ClusterQueue is Active."""
    ports = up.ports
    up.wait(
        "Kueue manager /readyz",
        lambda: http_ok(f"http://127.0.0.1:{ports['kueue-health']}/readyz")[0],
        90,
        0.3,
    )
    create_webhooks(up.kube, webhook_configs(up.bin_dir, up.root, mod, ports["kueue-webhook"]))
    up.wait(
        "Kueue webhooks answering (server-side dry-run)", lambda: webhook_works(up.kube), 60, 0.3
    )
    for path, obj in queue_objects():
        code, body = up.kube.request("POST", path, obj)
        if code not in (200, 201):
            raise RuntimeError(
                f"creating {obj['kind']} {obj['metadata']['name']} failed: {code} {body}"
            )
    up.wait(f"ClusterQueue {CLUSTER_QUEUE} Active", lambda: cluster_queue_active(up.kube), 60, 0.3)
    log(
        f"Kueue {version()} manager and webhooks ready "
        f"(https://127.0.0.1:{ports['kueue-webhook']}), "
        f"ClusterQueue {CLUSTER_QUEUE} Active ({up.elapsed()})"
    )


def health_row(kube: Kube) -> tuple[str, bool, str]:
    code, _ = kube.get(
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/devcluster-kueue-validating"
    )
    if code != 200:
        return ("kueue-queues", False, f"webhooks missing (HTTP {code})")
    active = cluster_queue_active(kube)
    detail = (
        f"webhooks registered, ClusterQueue {CLUSTER_QUEUE} {'Active' if active else 'NOT Active'}"
    )
    return ("kueue-queues", active, detail)
