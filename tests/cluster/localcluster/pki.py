"""The devcluster's PKI (the ``openssl`` CLI, regenerated at every ``up``) and kubeconfigs."""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import subprocess
from pathlib import Path

from .common import die


def openssl(*args: str, cwd: Path) -> None:
    r = subprocess.run(["openssl", *args], check=False, cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        die(f"openssl {' '.join(args)} failed:\n{r.stderr}")


EC_KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def make_leaf(pki: Path, name: str, subj: str, usage: str, sans: str | None = None) -> None:
    """A key and a certificate signed by the devcluster CA in ``pki``."""
    ext = [
        "basicConstraints=critical,CA:FALSE",
        "keyUsage=critical,digitalSignature,keyEncipherment",
        f"extendedKeyUsage={usage}",
    ]
    if sans:
        ext.append(f"subjectAltName={sans}")
    (pki / f"{name}.ext").write_text("\n".join(ext) + "\n")
    openssl(
        "req",
        "-new",
        *EC_KEY,
        "-keyout",
        f"{name}.key",
        "-out",
        f"{name}.csr",
        "-subj",
        subj,
        cwd=pki,
    )
    openssl(
        "x509",
        "-req",
        "-in",
        f"{name}.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-set_serial",
        str(secrets.randbits(63)),
        "-days",
        "825",
        "-out",
        f"{name}.crt",
        "-extfile",
        f"{name}.ext",
        cwd=pki,
    )
    (pki / f"{name}.csr").unlink()
    (pki / f"{name}.ext").unlink()
    os.chmod(pki / f"{name}.key", 0o600)


def make_pki(pki: Path) -> None:
    if not shutil.which("openssl"):
        die("the openssl CLI is required (Debian package: openssl)")
    pki.mkdir(parents=True, exist_ok=True)
    os.chmod(pki, 0o700)
    openssl(
        "req",
        "-x509",
        "-new",
        *EC_KEY,
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "3650",
        "-subj",
        "/CN=devcluster-ca",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
        cwd=pki,
    )
    make_leaf(
        pki,
        "apiserver",
        "/CN=kube-apiserver",
        "serverAuth",
        "IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
        "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local",
    )
    make_leaf(pki, "admin", "/O=system:masters/CN=devcluster-admin", "clientAuth")
    make_leaf(
        pki,
        "apiserver-kubelet-client",
        "/O=system:masters/CN=kube-apiserver-kubelet-client",
        "clientAuth",
    )
    make_leaf(pki, "front-proxy-client", "/CN=front-proxy-client", "clientAuth")
    make_leaf(pki, "kubelet", "/CN=devcluster-kubelet", "serverAuth", "IP:127.0.0.1,DNS:localhost")
    make_leaf(
        pki, "jobset-webhook", "/CN=jobset-webhook", "serverAuth", "IP:127.0.0.1,DNS:localhost"
    )
    make_leaf(pki, "authn", "/CN=devcluster-authn", "serverAuth", "IP:127.0.0.1,DNS:localhost")
    openssl("genrsa", "-out", "sa.key", "2048", cwd=pki)
    openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)
    for f in pki.iterdir():
        if f.suffix == ".key":
            os.chmod(f, 0o600)


def write_kubeconfig(
    path: Path, server: str, pki: Path, user: str = "devcluster-admin", cert: str = "admin"
) -> None:
    b64 = lambda p: base64.b64encode((pki / p).read_bytes()).decode()  # noqa: E731
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "devcluster",
                "cluster": {"server": server, "certificate-authority-data": b64("ca.crt")},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": b64(f"{cert}.crt"),
                    "client-key-data": b64(f"{cert}.key"),
                },
            }
        ],
        "contexts": [
            {
                "name": "devcluster",
                "context": {"cluster": "devcluster", "user": user, "namespace": "default"},
            }
        ],
        "current-context": "devcluster",
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(cfg, indent=2))
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
