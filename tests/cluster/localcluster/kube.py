"""A minimal Kubernetes REST client (stdlib), kubectl, manifests and health probes."""

from __future__ import annotations

import base64
import json
import socket
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path


class Kube:
    def __init__(self, server: str, pki: Path):
        self.server = server.rstrip("/")
        self.ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        self.ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))

    def request(
        self,
        method: str,
        path: str,
        body=None,
        *,
        ctype="application/json",
        timeout=10.0,
        raw=False,
    ):
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", ctype)
        req.add_header("Accept", "application/json")
        try:
            with urllib.request.urlopen(req, context=self.ctx, timeout=timeout) as r:
                payload = r.read()
                return r.status, (
                    payload
                    if raw
                    else (
                        json.loads(payload)
                        if payload.strip().startswith(b"{")
                        else payload.decode()
                    )
                )
        except urllib.error.HTTPError as e:
            payload = e.read()
            try:
                return e.code, json.loads(payload)
            except ValueError:
                return e.code, payload.decode(errors="replace")

    def get(self, path: str, **kw):
        return self.request("GET", path, **kw)


def kubectl(bin_dir: Path, root: Path, *args: str, input_: str | None = None, check=True) -> str:
    r = subprocess.run(
        [str(bin_dir / "kubectl"), "--kubeconfig", str(root / "kubeconfig"), *args],
        check=False,
        capture_output=True,
        text=True,
        input=input_,
    )
    if check and r.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)} failed: {r.stderr.strip()}")
    return r.stdout


def http_ok(url: str, ctx: ssl.SSLContext | None = None, timeout=2.0) -> tuple[bool, str]:
    try:
        with urllib.request.urlopen(url, context=ctx, timeout=timeout) as r:
            body = r.read(200).decode(errors="replace")
            return 200 <= r.status < 300, body.strip()
    except urllib.error.HTTPError as e:
        return False, f"HTTP {e.code}: {e.read(300).decode(errors='replace').strip()}"
    except Exception as e:
        return False, str(e)


def insecure_ctx() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


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


def check_health(root: Path, c: dict) -> tuple[bool, str]:
    """Probe a recorded component's health endpoint (HTTP(S) URL or unix socket)."""
    h = c.get("health") or {}
    if not h:
        return True, "no endpoint"
    if "unix" in h:
        return unix_socket_ok(h["unix"])
    url = h["url"]
    if h.get("tls") == "admin":
        ctx = ssl.create_default_context(cafile=str(root / "pki" / "ca.crt"))
        ctx.load_cert_chain(str(root / "pki" / "admin.crt"), str(root / "pki" / "admin.key"))
    elif h.get("tls") == "ca":
        ctx = ssl.create_default_context(cafile=str(root / "pki" / "ca.crt"))
    elif h.get("tls") == "insecure":
        ctx = insecure_ctx()
    else:
        ctx = None
    return http_ok(url, ctx)


def decode_manifests(bin_dir: Path, root: Path, manifests: Path) -> list[dict]:
    """The objects of a YAML manifest file, as JSON (kubectl converts; nothing is sent)."""
    out = kubectl(bin_dir, root, "create", "--dry-run=client", "-o", "json", "-f", str(manifests))
    items, dec, pos = [], json.JSONDecoder(), 0
    while True:
        while pos < len(out) and out[pos].isspace():
            pos += 1
        if pos >= len(out):
            break
        obj, pos = dec.raw_decode(out, pos)
        items.extend(obj.get("items", [obj]) if obj.get("kind") == "List" else [obj])
    return items


def url_webhooks(items: list[dict], root: Path, name_prefix: str, port: int) -> list[dict]:
    """Upstream's webhook configurations, renamed ``<prefix>-mutating``/``-validating`` and
    pointed at a local webhook server by URL, with the devcluster CA as their caBundle."""
    ca = base64.b64encode((root / "pki" / "ca.crt").read_bytes()).decode()
    result = []
    for obj in items:
        kind = obj["kind"]
        if kind not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            continue
        obj["metadata"] = {
            "name": f"{name_prefix}-"
            + ("mutating" if kind.startswith("Mutating") else "validating"),
            "labels": {"app.kubernetes.io/managed-by": "devcluster"},
        }
        for wh in obj["webhooks"]:
            path = wh["clientConfig"]["service"]["path"]
            wh["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca}
            wh["timeoutSeconds"] = 10
        result.append(obj)
    return result


def create_webhooks(kube: Kube, configs: list[dict]) -> None:
    """Create webhook configurations (admissionregistration.k8s.io/v1)."""
    for obj in configs:
        plural = (
            "mutatingwebhookconfigurations"
            if obj["kind"].startswith("Mutating")
            else "validatingwebhookconfigurations"
        )
        code, body = kube.request("POST", f"/apis/admissionregistration.k8s.io/v1/{plural}", obj)
        if code not in (200, 201):
            raise RuntimeError(f"creating {plural} failed: {code} {body}")


def crd_established(kube: Kube, name: str) -> bool:
    """Whether the CustomResourceDefinition ``name`` is Established."""
    code, body = kube.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
    if code != 200 or not isinstance(body, dict):
        return False
    return any(
        c["type"] == "Established" and c["status"] == "True"
        for c in body.get("status", {}).get("conditions", [])
    )
