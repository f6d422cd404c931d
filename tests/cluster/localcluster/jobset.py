"""JobSet: the CRD (read from the downloaded ``sigs.k8s.io/jobset`` module, never copied
into the repository), the manager as a local process, and its webhooks registered by URL."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from .common import ADDONS_MOD, env_flag, log
from .gobuild import gomod_require, jobset_module_dir
from .kube import (
    Kube,
    crd_established,
    create_webhooks,
    decode_manifests,
    http_ok,
    kubectl,
    url_webhooks,
)
from .procs import Launch

#: The ports `up` picks for the JobSet manager.
PORT_NAMES = ["webhook", "jobset-health"]
CRD = Path("config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml")
WEBHOOKS = Path("config/components/webhook/manifests.yaml")


def enabled() -> bool:
    """``DEVCLUSTER_JOBSET=0`` (or false/no/off) starts the cluster without JobSet: no CRD,
    no manager, no webhooks (and no Kueue, whose only integration here is JobSet)."""
    return env_flag("DEVCLUSTER_JOBSET")


def version() -> str:
    return gomod_require(ADDONS_MOD / "go.mod", "sigs.k8s.io/jobset")


def module_dir(bin_dir: Path) -> Path:
    """The JobSet module the binaries were built from (its manifests are read from there)."""
    manifest = json.loads((bin_dir / "manifest.json").read_text())
    jobset_dir = Path(manifest.get("jobset_module_dir", ""))
    if not (jobset_dir / CRD).exists():
        jobset_dir = jobset_module_dir()
    return jobset_dir


def install_crd(up: Launch, jobset_dir: Path) -> None:
    """Server-side apply the upstream CRD and wait until it is Established."""
    kubectl(
        up.bin_dir,
        up.root,
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=devcluster",
        "-f",
        str(jobset_dir / CRD),
    )
    up.wait(
        "JobSet CRD Established", lambda: crd_established(up.kube, "jobsets.jobset.x-k8s.io"), 30
    )


def start_manager(up: Launch) -> None:
    """The manager, with a generated configuration: no internal cert management, no leader
    election, no metrics, the webhook server on 127.0.0.1 with a certificate of our CA."""
    pki, ports = up.pki, up.ports
    jdir = up.root / "jobset"
    certdir = jdir / "certs"
    certdir.mkdir(parents=True)
    shutil.copy(pki / "jobset-webhook.crt", certdir / "tls.crt")
    shutil.copy(pki / "jobset-webhook.key", certdir / "tls.key")
    jcfg = {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": ports["webhook"], "certDir": str(certdir)},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{ports['jobset-health']}"},
        "metrics": {"bindAddress": "0"},
        "clientConnection": {"qps": 500, "burst": 500},
    }
    (jdir / "config.yaml").write_text(json.dumps(jcfg, indent=2))
    up.start(
        "jobset",
        [
            up.bin("jobset"),
            f"--config={jdir / 'config.yaml'}",
            f"--kubeconfig={up.kubeconfig}",
            "--metrics-bind-address=0",
            "--zap-log-level=info",
        ],
        health={"url": f"http://127.0.0.1:{ports['jobset-health']}/readyz"},
    )


def webhook_configs(bin_dir: Path, root: Path, jobset_dir: Path, port: int) -> list[dict]:
    """Upstream webhook manifests, pointed at the local webhook server by URL."""
    manifests = jobset_dir / WEBHOOKS
    result = url_webhooks(
        decode_manifests(bin_dir, root, manifests), root, "devcluster-jobset", port
    )
    for obj in result:
        for wh in obj["webhooks"]:
            if any(r.get("resources") == ["pods"] for r in wh.get("rules", [])):
                # as upstream's kustomize patch does: only JobSet pods go through the webhook
                wh["objectSelector"] = {
                    "matchExpressions": [
                        {"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"}
                    ]
                }
    if len(result) != 2:
        raise RuntimeError(f"unexpected webhook manifests in {manifests}")
    return result


def probe_jobset(name: str, labels: dict[str, str] | None = None) -> dict:
    """A one-pod JobSet for a server-side dry run that shows whether webhooks answer."""
    pod = {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}
    rjob = {"name": "w", "replicas": 1, "template": {"spec": {"template": {"spec": pod}}}}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": {"replicatedJobs": [rjob]},
    }


PROBE_JOBSET = probe_jobset("devcluster-webhook-probe")


def webhook_works(kube: Kube) -> bool:
    """Whether the JobSet webhooks answer (a server-side dry-run create is defaulted)."""
    code, body = kube.request(
        "POST",
        "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets?dryRun=All",
        PROBE_JOBSET,
    )
    served = isinstance(body, dict) and bool(body.get("spec", {}).get("successPolicy"))
    return code == 201 and served


def finish(up: Launch, jobset_dir: Path) -> None:
    """Wait for the manager, register its webhooks, and wait until they answer."""
    ports = up.ports
    up.wait(
        "JobSet manager /readyz",
        lambda: http_ok(f"http://127.0.0.1:{ports['jobset-health']}/readyz")[0],
        90,
        0.3,
    )
    create_webhooks(up.kube, webhook_configs(up.bin_dir, up.root, jobset_dir, ports["webhook"]))
    up.wait(
        "JobSet webhooks answering (server-side dry-run)", lambda: webhook_works(up.kube), 60, 0.3
    )
    log(
        f"JobSet {version()} manager and webhooks ready "
        f"(https://127.0.0.1:{ports['webhook']}) ({up.elapsed()})"
    )


def health_row(kube: Kube) -> tuple[str, bool, str]:
    code, _ = kube.get(
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/devcluster-jobset-validating"
    )
    return (
        "jobset-webhooks",
        code == 200,
        "registered" if code == 200 else f"missing (HTTP {code})",
    )
