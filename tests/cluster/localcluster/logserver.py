"""The log server: answers the kubelet's containerLogs API for the fake nodes (component
``logserver``, HTTPS on the port kwok gives every fake node as its kubelet port).

A container's log is the pod annotation ``devcluster/log``; ``tailLines``, ``limitBytes``,
``timestamps``, ``previous`` and ``follow`` behave as the kubelet's do."""

from __future__ import annotations

import contextlib
import http.server
import signal
import socketserver
import ssl
import sys
import time
import urllib.parse
from pathlib import Path

from .common import log
from .kube import Kube
from .procs import State


def pod_logs(kube: Kube, ns: str, pod: str, container: str):
    """(HTTP code, the pod's annotations, (pod, the container's status or None))."""
    code, obj = kube.get(
        f"/api/v1/namespaces/{urllib.parse.quote(ns)}/pods/{urllib.parse.quote(pod)}"
    )
    if code != 200:
        return code, None, None
    ann = obj.get("metadata", {}).get("annotations") or {}
    statuses = {s["name"]: s for s in obj.get("status", {}).get("containerStatuses") or []}
    statuses.update(
        {s["name"]: s for s in obj.get("status", {}).get("initContainerStatuses") or []}
    )
    return 200, ann, (obj, statuses.get(container))


def log_body(ann: dict, state: dict, q: dict) -> bytes:
    """The log text of a container in ``state``, shaped by the query (tailLines,
    timestamps, limitBytes)."""
    text = ann.get("devcluster/log", "")
    lines = text.splitlines()
    if "tailLines" in q:
        n = int(q["tailLines"][0])
        lines = lines[-n:] if n > 0 else []
    started = (state.get("running") or state.get("terminated") or {}).get(
        "startedAt"
    ) or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    ts = started.replace("Z", ".000000000Z") if "." not in started else started
    if q.get("timestamps", ["false"])[0] == "true":
        lines = [f"{ts} {ln}" for ln in lines]
    body = "".join(ln + "\n" for ln in lines).encode()
    if "limitBytes" in q:
        body = body[: int(q["limitBytes"][0])]
    return body


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    kube: Kube  # set by serve()

    def log_message(self, fmt, *a):  # quieter access log
        sys.stdout.write(f"{time.strftime('%H:%M:%S')} {fmt % a}\n")
        sys.stdout.flush()

    def send(self, code: int, body: bytes, ctype="text/plain; charset=utf-8"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        u = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(u.query)
        if u.path in ("/healthz", "/readyz", "/livez"):
            return self.send(200, b"ok")
        parts = [urllib.parse.unquote(p) for p in u.path.strip("/").split("/")]
        if len(parts) != 4 or parts[0] != "containerLogs":
            return self.send(404, b"not found (devcluster log server serves only /containerLogs)")
        _, ns, pod, container = parts
        code, ann, extra = pod_logs(self.kube, ns, pod, container)
        if code != 200:
            return self.send(404, f"pod {ns}/{pod} not found".encode())
        _, cstatus = extra
        if cstatus is None:
            return self.send(400, f"container {container} is not valid for pod {pod}".encode())
        state = cstatus.get("state") or {}
        if q.get("previous", ["false"])[0] == "true":  # the run before a restart
            state = cstatus.get("lastState") or {}
        if "running" not in state and "terminated" not in state:
            return self.send(
                400, f'container "{container}" in pod "{pod}" is waiting to start'.encode()
            )
        body = log_body(ann, state, q)
        if q.get("follow", ["false"])[0] != "true":
            return self.send(200, body)
        return self.follow(body, ns, pod, container)

    def follow(self, body: bytes, ns: str, pod: str, container: str) -> None:
        """Stream the lines, then keep the stream open while the container runs."""
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def chunk(b: bytes):
            self.wfile.write(f"{len(b):x}\r\n".encode() + b + b"\r\n")
            self.wfile.flush()

        try:
            if body:
                chunk(body)
            while True:
                code, _, extra2 = pod_logs(self.kube, ns, pod, container)
                if (
                    code != 200
                    or extra2[1] is None
                    or "running" not in (extra2[1].get("state") or {})
                ):
                    break
                time.sleep(1)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def cmd_logserver(args) -> int:
    root = Path(args.state_dir)
    pki = root / "pki"
    st = State(root)
    Handler.kube = Kube(st.data["server"], pki)
    httpd = Server(("127.0.0.1", args.port), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(pki / "kubelet.crt"), str(pki / "kubelet.key"))
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    signal.signal(signal.SIGTERM, lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
    log(f"log server listening on https://127.0.0.1:{args.port}")
    with contextlib.suppress(KeyboardInterrupt):
        httpd.serve_forever()
    return 0
