#!/usr/bin/env python3
"""Short-lived credentials for the devcluster (standard library only).

* **A token webhook of ours** (component ``authn``, HTTPS on 127.0.0.1): the kube-apiserver
  asks it about every bearer token that is not a service-account token
  (``--authentication-token-webhook-config-file``, webhook cache TTL 0). The API server still
  keeps a successful check of a token for 10 s (its built-in token cache, no flag), so a token
  is refused from its expiry on, or 10 s after its first use, whichever is later. It accepts
  the tokens :func:`mint` issues as the user and groups they name, and refuses everything
  else. Other tests never meet it: client
  certificates and service-account tokens are accepted before the webhook is asked.
* **Tokens that expire**: ``auth.py token --user U --ttl N`` prints an
  ``ExecCredential`` with a fresh token valid for ``N`` seconds: the command of an exec-plugin
  kubeconfig (:func:`exec_kubeconfig`), run by the client every time it wants a token.
  ``token-file`` keeps a file rotated the way the kubelet rotates a projected
  service-account token (a new token when 80 % of the old one's life is gone), for
  ``tokenFile`` kubeconfigs (:func:`token_file_kubeconfig`).
* **An audit log of those identities only** (``.devcluster/logs/audit.log``, level Metadata,
  group :data:`GROUP`): who sent which request, for the fault suite's request counts. It never
  holds a token (audit events do not record credentials).

The HMAC key lives in ``.devcluster/pki/`` and every issued token is appended to
``.devcluster/authn/issued.log`` (mode 0600), so the log-hygiene tests know what to look for;
``down`` removes both. See tests/cluster/README.md, "Short-lived credentials".
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hmac
import http.server
import json
import os
import secrets
import signal
import socketserver
import ssl
import sys
import threading
import time
from pathlib import Path

__all__ = [
    "GROUP",
    "apiserver_flags",
    "audit_events",
    "exec_kubeconfig",
    "issued_tokens",
    "mint",
    "prepare",
    "token_file_kubeconfig",
    "verify",
    "write_atomically",
]

HERE = Path(__file__).resolve()
#: Every identity of ours is in this group (the audit policy logs its requests only).
GROUP = "devcluster:short-lived"
_PREFIX = "dcst_"
_EXEC_API = "client.authentication.k8s.io/v1"


def _key_file(root: Path) -> Path:
    return root / "pki" / "authn-hmac.key"


def _ledger(root: Path) -> Path:
    return root / "authn" / "issued.log"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


# --------------------------------------------------------------------------------------
# setup (called by `up`)
# --------------------------------------------------------------------------------------


def prepare(root: Path, port: int) -> None:
    """The webhook's key and kubeconfig and the audit policy, before the API server starts
    (the certificate ``pki/authn.crt`` is made with the others by ``make_pki``)."""
    pki = root / "pki"
    key = _key_file(root)
    key.write_bytes(secrets.token_bytes(32))
    os.chmod(key, 0o600)
    folder = root / "authn"
    folder.mkdir(mode=0o700, exist_ok=True)
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "devcluster-authn",
                "cluster": {
                    "server": f"https://127.0.0.1:{port}/authenticate",
                    "certificate-authority": str(pki / "ca.crt"),
                },
            }
        ],
        "users": [{"name": "kube-apiserver", "user": {}}],
        "contexts": [
            {"name": "authn", "context": {"cluster": "devcluster-authn", "user": "kube-apiserver"}}
        ],
        "current-context": "authn",
    }
    (folder / "webhook.kubeconfig").write_text(json.dumps(config, indent=2))
    policy = {
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Policy",
        "omitStages": ["RequestReceived"],
        "rules": [{"level": "Metadata", "userGroups": [GROUP]}, {"level": "None"}],
    }
    (folder / "audit-policy.json").write_text(json.dumps(policy, indent=2))


def apiserver_flags(root: Path) -> list[str]:
    """The kube-apiserver flags of the webhook and the audit log."""
    folder = root / "authn"
    return [
        f"--authentication-token-webhook-config-file={folder / 'webhook.kubeconfig'}",
        "--authentication-token-webhook-version=v1",
        # 0: no webhook cache (the API server's own 10 s success cache stays).
        "--authentication-token-webhook-cache-ttl=0s",
        f"--audit-policy-file={folder / 'audit-policy.json'}",
        f"--audit-log-path={root / 'logs' / 'audit.log'}",
        "--audit-log-format=json",
        "--audit-log-maxsize=500",
        "--audit-log-maxbackup=1",
    ]


# --------------------------------------------------------------------------------------
# tokens
# --------------------------------------------------------------------------------------


def mint(root: Path, user: str, groups: list[str], ttl: float) -> tuple[str, int]:
    """A token for ``user`` (in ``groups`` and :data:`GROUP`) valid for ``ttl`` seconds, and
    its expiry (whole epoch seconds). Recorded in the ledger."""
    expires = int(time.time() + ttl)
    claims = {"u": user, "g": sorted({*groups, GROUP}), "exp": expires, "n": secrets.token_hex(8)}
    payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
    signature = _b64(hmac.new(_key_file(root).read_bytes(), payload.encode(), "sha256").digest())
    token = f"{_PREFIX}{payload}.{signature}"
    ledger = _ledger(root)
    fd = os.open(ledger, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "a") as handle:
        handle.write(token + "\n")
    return token, expires


def verify(key: bytes, token: str, now: float) -> tuple[dict | None, str]:
    """The claims of a valid token, or ``None`` and why not (``foreign``, ``forged``,
    ``expired``)."""
    if not token.startswith(_PREFIX) or token.count(".") != 1:
        return None, "foreign"
    payload, signature = token[len(_PREFIX) :].split(".")
    expected = _b64(hmac.new(key, payload.encode(), "sha256").digest())
    if not hmac.compare_digest(expected, signature):
        return None, "forged"
    try:
        claims = json.loads(_unb64(payload))
    except ValueError:
        return None, "forged"
    if now >= float(claims["exp"]):
        return None, "expired"
    return claims, "ok"


def issued_tokens(root: Path) -> list[str]:
    """Every token minted for this cluster so far."""
    try:
        return _ledger(root).read_text().split()
    except OSError:
        return []


def audit_events(root: Path, *, users: set[str] | None = None) -> list[dict]:
    """The audit log's events (stage ``ResponseComplete``, or ``ResponseStarted`` for a
    watch that is still open), one per request, of ``users`` (all of ours by default)."""
    path = root / "logs" / "audit.log"
    by_id: dict[str, dict] = {}
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a line being written
        if users is not None and event.get("user", {}).get("username") not in users:
            continue
        known = by_id.get(event["auditID"])
        if known is None or event.get("stage") == "ResponseComplete":
            by_id[event["auditID"]] = event
    return sorted(by_id.values(), key=lambda e: e.get("requestReceivedTimestamp", ""))


def _exec_credential(token: str, expires: int) -> str:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires))
    return json.dumps(
        {
            "apiVersion": _EXEC_API,
            "kind": "ExecCredential",
            "status": {"token": token, "expirationTimestamp": stamp},
        }
    )


def write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)


def rotate_token_file(
    root: Path, path: Path, user: str, groups: list[str], *, ttl: float, fraction: float = 0.8
) -> None:
    """Keep ``path`` holding a valid token: a new one (atomically, by rename) when
    ``fraction`` of the current one's lifetime is gone, as the kubelet does."""
    while True:
        token, _ = mint(root, user, groups, ttl)
        write_atomically(path, token)
        time.sleep(max(0.1, ttl * fraction))


# --------------------------------------------------------------------------------------
# kubeconfigs
# --------------------------------------------------------------------------------------


def _server(root: Path, server: str | None) -> str:
    if server:
        return server
    return json.loads((root / "state.json").read_text())["server"]


def _kubeconfig(root: Path, server: str | None, user: dict, namespace: str | None) -> dict:
    ca = base64.b64encode((root / "pki" / "ca.crt").read_bytes()).decode()
    context: dict = {"cluster": "devcluster", "user": "short-lived"}
    if namespace:
        context["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "devcluster",
                "cluster": {"server": _server(root, server), "certificate-authority-data": ca},
            }
        ],
        "users": [{"name": "short-lived", "user": user}],
        "contexts": [{"name": "short-lived", "context": context}],
        "current-context": "short-lived",
    }


def exec_kubeconfig(
    root: Path,
    path: Path,
    *,
    user: str,
    groups: list[str] = (),  # type: ignore[assignment]
    ttl: float,
    claim_ttl: float | None = None,
    server: str | None = None,
    namespace: str | None = None,
) -> Path:
    """A kubeconfig whose exec plugin mints a token valid ``ttl`` seconds at every call (and
    says it lasts ``claim_ttl`` seconds, when given)."""
    args = [str(HERE), "token", "--state-dir", str(root), "--user", user, "--ttl", str(ttl)]
    if claim_ttl is not None:
        args += ["--claim-ttl", str(claim_ttl)]
    for group in groups:
        args += ["--group", group]
    plugin = {
        "apiVersion": _EXEC_API,
        "command": sys.executable,
        "args": args,
        "interactiveMode": "Never",
    }
    config = _kubeconfig(root, server, {"exec": plugin}, namespace)
    write_atomically(path, json.dumps(config, indent=2))
    return path


def token_file_kubeconfig(
    root: Path,
    path: Path,
    token_file: Path,
    *,
    server: str | None = None,
    namespace: str | None = None,
) -> Path:
    """A kubeconfig whose user reads ``token_file`` (kept fresh by ``token-file``)."""
    config = _kubeconfig(root, server, {"tokenFile": str(token_file)}, namespace)
    write_atomically(path, json.dumps(config, indent=2))
    return path


# --------------------------------------------------------------------------------------
# the webhook (component "authn")
# --------------------------------------------------------------------------------------


class _Ledger:
    """What the webhook decided, per user (``GET /stats``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users: dict[str, dict] = {}
        self.refused = {"foreign": 0, "forged": 0, "expired": 0}

    def note(self, claims: dict | None, why: str, token: str) -> None:
        with self.lock:
            if claims is None:
                self.refused[why] = self.refused.get(why, 0) + 1
                if why == "expired":
                    with contextlib.suppress(ValueError, KeyError, IndexError):
                        body = _unb64(token[len(_PREFIX) :].split(".", maxsplit=1)[0])
                        user = self._user(json.loads(body)["u"])
                        user["expired"] += 1
                return
            user = self._user(claims["u"])
            user["accepted"] += 1
            user["tokens"].add(claims["n"])

    def _user(self, name: str) -> dict:
        return self.users.setdefault(name, {"accepted": 0, "expired": 0, "tokens": set()})

    def snapshot(self) -> dict:
        with self.lock:
            users = {name: {**u, "tokens": len(u["tokens"])} for name, u in self.users.items()}
            return {"users": users, "refused": dict(self.refused)}


def serve(root: Path, port: int) -> int:
    """Answer the API server's TokenReviews on ``https://127.0.0.1:<port>/authenticate``."""
    pki = root / "pki"
    key = _key_file(root).read_bytes()
    ledger = _Ledger()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt: str, *args: object) -> None:  # request lines never hold tokens
            if not self.path.startswith("/authenticate"):
                sys.stdout.write(f"{time.strftime('%H:%M:%S')} {fmt % args}\n")
                sys.stdout.flush()

        def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path in ("/healthz", "/readyz"):
                return self._send(200, b"ok", "text/plain")
            if self.path == "/stats":
                return self._send(200, json.dumps(ledger.snapshot()).encode())
            return self._send(404, b"not found", "text/plain")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                review = json.loads(self.rfile.read(length))
                token = str(review["spec"]["token"])
            except (ValueError, KeyError, TypeError):
                return self._send(400, b"not a TokenReview", "text/plain")
            claims, why = verify(key, token, time.time())
            ledger.note(claims, why, token)
            status: dict = {"authenticated": claims is not None}
            if claims is not None:
                status["user"] = {"username": claims["u"], "groups": claims["g"]}
            else:
                status["error"] = f"devcluster short-lived token: {why}"
            answer = {"apiVersion": review.get("apiVersion"), "kind": "TokenReview"}
            self._send(200, json.dumps({**answer, "status": status}).encode())

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True
        allow_reuse_address = True

    httpd = Server(("127.0.0.1", port), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(pki / "authn.crt"), str(pki / "authn.key"))
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    signal.signal(signal.SIGTERM, lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
    print(f"token webhook listening on https://127.0.0.1:{port}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        httpd.serve_forever()
    return 0


# --------------------------------------------------------------------------------------
# command line (the exec plugin, the token-file rotator, the webhook)
# --------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="devcluster_auth", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("token", "token-file"):
        p = sub.add_parser(name)
        p.add_argument("--state-dir", required=True)
        p.add_argument("--user", required=True)
        p.add_argument("--group", action="append", default=[])
        p.add_argument("--ttl", type=float, required=True)
        if name == "token-file":
            p.add_argument("--path", required=True)
            p.add_argument("--fraction", type=float, default=0.8)
        else:
            p.add_argument("--raw", action="store_true", help="print the token, not a credential")
            p.add_argument(
                "--claim-ttl",
                type=float,
                help="the lifetime the credential announces (default: --ttl); a token that "
                "dies before it says it does is refused early, as a revoked one is",
            )
    s = sub.add_parser("serve")
    s.add_argument("--state-dir", required=True)
    s.add_argument("--port", type=int, required=True)
    args = ap.parse_args(argv)
    root = Path(args.state_dir)
    if args.cmd == "serve":
        return serve(root, args.port)
    if args.cmd == "token-file":
        with contextlib.suppress(KeyboardInterrupt):
            rotate_token_file(
                root, Path(args.path), args.user, args.group, ttl=args.ttl, fraction=args.fraction
            )
        return 0
    token, expires = mint(root, args.user, args.group, args.ttl)
    if args.claim_ttl is not None:
        expires = int(time.time() + args.claim_ttl)
    print(token if args.raw else _exec_credential(token, expires))
    return 0


if __name__ == "__main__":
    sys.exit(main())
