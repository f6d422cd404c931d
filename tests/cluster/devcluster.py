#!/usr/bin/env python3
"""devcluster: a real, Docker-free Kubernetes control plane with the upstream
JobSet controller, for tests and the demo.

Standard library only (runs with the system python3, no venv). Needs the Go
toolchain (for `build`) and the `openssl` CLI (for `up`).

    python3 tests/cluster/devcluster.py build    # build/cached binaries (cold: 8-30 min)
    python3 tests/cluster/devcluster.py up       # start the cluster in .devcluster/
    python3 tests/cluster/devcluster.py status   # health of every component
    python3 tests/cluster/devcluster.py down     # stop every process that `up` started

See tests/cluster/README.md.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import hashlib
import http.server
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import socketserver
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
K8S_MOD = HERE / "k8s"
ADDONS_MOD = HERE / "addons"
CONTAINERD_MOD = HERE / "containerd"
NODETOOLS_MOD = HERE / "nodetools"
STAGES_FILE = HERE / "kwok-stages.yaml"

# The real node and its images live in sibling modules that use this module's helpers.
sys.modules.setdefault("devcluster", sys.modules[__name__])
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
import devcluster_auth  # noqa: E402
import devcluster_images  # noqa: E402
import devcluster_node  # noqa: E402

# -buildvcs=false: the wrapper modules live inside this git checkout; stamping its commit
# would make binaries differ per commit and fails on checkouts git refuses to read.
GOFLAGS = "-mod=readonly -buildvcs=false"

# Bump when the build recipe below changes in a way that must invalidate caches.
BUILD_RECIPE = "3"

ZONE_LABEL = "topology.kubernetes.io/zone"
SLICE_LABEL = "devcluster/slice"
NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"
NODE_COUNT = 8
ZONES = ["zone-a", "zone-b"]
SLICES = ["slice-0", "slice-1", "slice-2", "slice-3"]

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


def log(msg: str) -> None:
    print(f"[devcluster] {msg}", flush=True)


def die(msg: str, code: int = 1) -> None:
    print(f"[devcluster] ERROR: {msg}", file=sys.stderr, flush=True)
    sys.exit(code)


def fmt_secs(s: float) -> str:
    s = int(s)
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def state_dir() -> Path:
    return Path(os.environ.get("DEVCLUSTER_STATE_DIR") or str(REPO / ".devcluster")).resolve()


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "airflow-provider-jobset" / "cluster-bin"


_LOCK_HELD = False


@contextlib.contextmanager
def state_lock():
    """Serialise up/down on one state directory (re-entrant within a process)."""
    global _LOCK_HELD  # noqa: PLW0603
    if _LOCK_HELD:
        yield
        return
    locks = cache_root().parent / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    name = hashlib.sha256(str(state_dir()).encode()).hexdigest()[:16]
    with open(locks / f"state-{name}.lock", "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"another devcluster up/down on {state_dir()} is running; waiting for it ...")
            fcntl.flock(f, fcntl.LOCK_EX)
        _LOCK_HELD = True
        try:
            yield
        finally:
            _LOCK_HELD = False


# --------------------------------------------------------------------------------------
# Build
# --------------------------------------------------------------------------------------


def find_go() -> str:
    go = os.environ.get("GO") or shutil.which("go")
    if not go and os.path.exists("/usr/local/go/bin/go"):
        go = "/usr/local/go/bin/go"
    if not go:
        die("the Go toolchain (go >= 1.26) is required to build the devcluster binaries")
    return go


def go_env() -> dict:
    env = os.environ.copy()
    env["GOTOOLCHAIN"] = "local"
    env["CGO_ENABLED"] = "0"
    env["GOFLAGS"] = GOFLAGS
    env.pop("GOWORK", None)
    env["GOWORK"] = "off"
    return env


def gomod_require(modfile: Path, module: str) -> str:
    m = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", modfile.read_text(), re.M)
    if not m:
        die(f"{module} not found in {modfile}")
    return m.group(1)


def k8s_ldflags() -> list[str]:
    kver = gomod_require(K8S_MOD / "go.mod", "k8s.io/kubernetes")
    m = re.match(r"v(\d+)\.(\d+)", kver)
    major, minor = m.group(1), m.group(2)
    kld = ["-s", "-w", "-buildid="]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        kld += [
            f"-X {pkg}.gitVersion={kver}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
        ]
    return kld


K8S_TAGS = "selinux,notest"


def build_plan() -> list[dict]:
    """The control plane: etcd, kube-*, kubectl, kwok, JobSet."""
    jver = gomod_require(ADDONS_MOD / "go.mod", "sigs.k8s.io/jobset")
    kld = k8s_ldflags()
    ktags = K8S_TAGS
    plan = [
        # etcd first: small, and shares most deps with the apiserver.
        dict(
            name="etcd",
            mod=K8S_MOD,
            pkg="go.etcd.io/etcd/server/v3",
            tags="",
            ldflags=["-s", "-w", "-buildid="],
        ),
        dict(
            name="kube-apiserver",
            mod=K8S_MOD,
            pkg="k8s.io/kubernetes/cmd/kube-apiserver",
            tags=ktags,
            ldflags=kld,
        ),
        dict(
            name="kube-controller-manager",
            mod=K8S_MOD,
            pkg="k8s.io/kubernetes/cmd/kube-controller-manager",
            tags=ktags,
            ldflags=kld,
        ),
        dict(
            name="kube-scheduler",
            mod=K8S_MOD,
            pkg="k8s.io/kubernetes/cmd/kube-scheduler",
            tags=ktags,
            ldflags=kld,
        ),
        dict(
            name="kubectl",
            mod=K8S_MOD,
            pkg="k8s.io/kubernetes/cmd/kubectl",
            tags=ktags,
            ldflags=kld,
        ),
        dict(
            name="kwok",
            mod=ADDONS_MOD,
            pkg="sigs.k8s.io/kwok/cmd/kwok",
            tags="",
            ldflags=["-s", "-w", "-buildid="],
        ),
        dict(
            name="jobset",
            mod=ADDONS_MOD,
            pkg="sigs.k8s.io/jobset",
            tags="",
            ldflags=[
                "-s",
                "-w",
                "-buildid=",
                f"-X sigs.k8s.io/jobset/pkg/version.GitVersion={jver}",
            ],
        ),
    ]
    return plan


def node_plan() -> list[dict]:
    """The real node: the pause program, containerd (+ shim, ctr), CoreDNS, kubelet."""
    cmod = "github.com/containerd/containerd/v2"
    cver = gomod_require(CONTAINERD_MOD / "go.mod", cmod)
    cld = [
        "-s",
        "-w",
        "-buildid=",
        f"-X {cmod}/version.Version={cver}",
        f"-X {cmod}/version.Package={cmod}",
    ]
    plain = ["-s", "-w", "-buildid="]
    ctags = "urfave_cli_no_docs"
    return [
        dict(name="pause", mod=NODETOOLS_MOD, pkg="./pause", tags="", ldflags=plain),
        dict(
            name="containerd-shim-runc-v2",
            mod=CONTAINERD_MOD,
            pkg=f"{cmod}/cmd/containerd-shim-runc-v2",
            tags=ctags,
            ldflags=cld,
        ),
        dict(name="ctr", mod=CONTAINERD_MOD, pkg=f"{cmod}/cmd/ctr", tags=ctags, ldflags=cld),
        dict(
            name="containerd",
            mod=CONTAINERD_MOD,
            pkg=f"{cmod}/cmd/containerd",
            tags=ctags,
            ldflags=cld,
        ),
        dict(name="coredns", mod=NODETOOLS_MOD, pkg="./coredns", tags="", ldflags=plain),
        dict(
            name="kubelet",
            mod=K8S_MOD,
            pkg="k8s.io/kubernetes/cmd/kubelet",
            tags=K8S_TAGS,
            ldflags=k8s_ldflags(),
        ),
    ]


def _mod_files(*mods: Path) -> list[Path]:
    files = []
    for mod in mods:
        files += [mod / "go.mod", mod / "go.sum"]
        files += sorted(p for p in mod.rglob("*.go"))  # our own programs (nodetools)
    return files


#: What is built and cached together: the control plane, and the real node's binaries.
BUNDLES = {
    "control-plane": dict(
        root="cluster-bin",
        mods=(K8S_MOD, ADDONS_MOD),
        plan=build_plan,
        what="Kubernetes, etcd, kwok and JobSet",
        estimate="8-10 min on an idle 2-core machine, 30+ min on a busy one",
    ),
    "node": dict(
        root="node-bin",
        mods=(K8S_MOD, CONTAINERD_MOD, NODETOOLS_MOD),
        plan=node_plan,
        what="the real node's kubelet, containerd and CoreDNS",
        estimate="5 min with the control plane's build cache, 15+ min without",
    ),
}


def bundle_root(bundle: str) -> Path:
    return cache_root().parent / BUNDLES[bundle]["root"]


def go_build_args(item: dict, out: Path, jobs: int) -> list[str]:
    args = [find_go(), "build", "-p", str(jobs), "-v", "-trimpath"]
    if item["tags"]:
        args.append("-tags=" + item["tags"])
    args += ["-ldflags", " ".join(item["ldflags"]), "-o", str(out), item["pkg"]]
    return args


def cache_key(bundle: str = "control-plane") -> tuple[str, dict]:
    go = find_go()
    goversion = subprocess.run(
        [go, "version"], capture_output=True, text=True, env=go_env(), check=True
    ).stdout.strip()
    h = hashlib.sha256()
    info = {"recipe": BUILD_RECIPE, "go": goversion, "files": {}}
    if bundle != "control-plane":
        info["bundle"] = bundle
    for f in _mod_files(*BUNDLES[bundle]["mods"]):
        data = f.read_bytes()
        info["files"][str(f.relative_to(REPO))] = hashlib.sha256(data).hexdigest()
    plan = [
        {k: (str(v.relative_to(REPO)) if isinstance(v, Path) else v) for k, v in p.items()}
        for p in BUNDLES[bundle]["plan"]()
    ]
    info["plan"] = plan
    info["env"] = {"GOTOOLCHAIN": "local", "CGO_ENABLED": "0", "GOFLAGS": GOFLAGS}
    h.update(json.dumps(info, sort_keys=True).encode())
    return h.hexdigest()[:20], info


def bin_dir_if_built(bundle: str = "control-plane") -> Path | None:
    key, _ = cache_key(bundle)
    d = bundle_root(bundle) / key
    man = d / "manifest.json"
    if man.exists():
        try:
            data = json.loads(man.read_text())
            if all((d / n).exists() for n in data["binaries"]):
                return d
        except (ValueError, KeyError):
            pass
    return None


def jobset_module_dir() -> Path:
    """Directory of the downloaded sigs.k8s.io/jobset module (GOMODCACHE)."""
    out = subprocess.run(
        [find_go(), "mod", "download", "-json", "sigs.k8s.io/jobset"],
        check=False,
        cwd=ADDONS_MOD,
        env=go_env(),
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        die(f"go mod download sigs.k8s.io/jobset failed:\n{out.stdout}\n{out.stderr}")
    return Path(json.loads(out.stdout)["Dir"])


def prune_cache(root: Path, keep: Path, max_builds: int = 3) -> None:
    """Drop abandoned partial builds and all but the newest `max_builds` complete ones."""
    builds = []
    for d in root.iterdir():
        if not d.is_dir():
            continue
        m = re.search(r"\.partial-(\d+)$", d.name)
        if m:
            if not Path(f"/proc/{m.group(1)}").exists():
                shutil.rmtree(d, ignore_errors=True)
        elif (d / "manifest.json").exists() and d != keep:
            builds.append(d)
    builds.sort(key=lambda d: d.stat().st_mtime, reverse=True)
    for d in builds[max_builds - 1 :]:
        log(f"removing old cached build {d}")
        shutil.rmtree(d, ignore_errors=True)


@contextlib.contextmanager
def build_lock():
    """One build at a time on this machine (Go builds, image builds), across checkouts."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".build.lock", "w") as lockf:
        try:
            fcntl.flock(lockf, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log("another devcluster build is running; waiting for it ...")
            fcntl.flock(lockf, fcntl.LOCK_EX)
        yield


def cmd_build(args) -> Path:
    """Build (or reuse) the control plane and, unless DEVCLUSTER_REAL_NODE=0, the real
    node's binaries and images; return the control plane's binary directory."""
    quiet = getattr(args, "quiet", False)
    bin_dir = build_bundle("control-plane", quiet)
    if devcluster_node.enabled():
        devcluster_node.setup(quiet=True)
        node_bin = build_bundle("node", quiet)
        devcluster_images.build(node_bin, quiet)
    return bin_dir


def build_bundle(bundle: str, quiet: bool = False) -> Path:
    key, info = cache_key(bundle)
    root = bundle_root(bundle)
    root.mkdir(parents=True, exist_ok=True)
    final = root / key
    existing = bin_dir_if_built(bundle)
    if existing:
        if not quiet:
            log(f"{bundle} binaries are cached in {existing} (warm, nothing to build)")
        return existing
    with build_lock():
        existing = bin_dir_if_built(bundle)
        if existing:
            if not quiet:
                log(f"{bundle} binaries are cached in {existing} (warm, nothing to build)")
            return existing
        jobs = int(os.environ.get("DEVCLUSTER_BUILD_JOBS", "2"))
        plan = BUNDLES[bundle]["plan"]()
        log(f"cold build of {len(plan)} {bundle} components into {final}")
        log(
            f"this compiles {BUNDLES[bundle]['what']} from Go modules: it takes a while "
            f"({BUNDLES[bundle]['estimate']}; then it is cached)"
        )
        tmp = root / f"{key}.partial-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        t0 = time.monotonic()
        times = {}
        for i, item in enumerate(plan, 1):
            t1 = time.monotonic()
            blog = tmp / f"build-{item['name']}.log"
            cmd = go_build_args(item, tmp / item["name"], jobs)
            log(f"[{i}/{len(plan)}] building {item['name']} ({item['pkg']}) ...")
            with open(blog, "w") as lf:
                p = subprocess.Popen(
                    cmd, cwd=item["mod"], env=go_env(), stdout=lf, stderr=subprocess.STDOUT
                )
                last = time.monotonic()
                while p.poll() is None:
                    time.sleep(1)
                    if time.monotonic() - last >= 30:
                        last = time.monotonic()
                        npk = len(log_tail(str(blog), 10**9).splitlines())
                        log(
                            f"    still building {item['name']}: {fmt_secs(last - t1)} "
                            f"(total {fmt_secs(last - t0)}, {npk} packages compiled so far)"
                        )
            if p.returncode != 0:
                tail = log_tail(str(blog), 40)
                die(f"building {item['name']} failed (exit {p.returncode}); log {blog}:\n{tail}")
            times[item["name"]] = round(time.monotonic() - t1, 1)
            log(f"    {item['name']} done in {fmt_secs(times[item['name']])}")
        manifest = {
            "key": key,
            "bundle": bundle,
            "info": info,
            "binaries": [p["name"] for p in plan],
            "build_seconds": times,
            "total_seconds": round(time.monotonic() - t0, 1),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        if bundle == "control-plane":
            # Remember where the upstream JobSet manifests live (read at `up` time, never
            # copied into the repository).
            manifest["jobset_module_dir"] = str(jobset_module_dir())
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2))
        if final.exists():
            shutil.rmtree(final)
        os.rename(tmp, final)
        prune_cache(root, keep=final)
        log(f"cold build finished in {fmt_secs(manifest['total_seconds'])}: {final}")
        return final


# --------------------------------------------------------------------------------------
# PKI (openssl CLI)
# --------------------------------------------------------------------------------------


def openssl(*args: str, cwd: Path) -> None:
    r = subprocess.run(["openssl", *args], check=False, cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        die(f"openssl {' '.join(args)} failed:\n{r.stderr}")


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


EC_KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


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


# --------------------------------------------------------------------------------------
# Minimal Kubernetes REST client (stdlib)
# --------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------
# Process management
# --------------------------------------------------------------------------------------


def free_ports(n: int) -> list[int]:
    socks, ports = [], []
    try:
        while len(ports) < n:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
            socks.append(s)
            if p not in ports:
                ports.append(p)
    finally:
        for s in socks:
            s.close()
    return ports


def proc_start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
        return data.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def proc_pgid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
        return int(data.rsplit(")", 1)[1].split()[2])
    except (OSError, IndexError, ValueError):
        return None


def proc_is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def component_alive(c: dict) -> bool:
    pid = c.get("pid")
    if not pid:
        return False
    st = proc_start_time(pid)
    return st is not None and st == c.get("start_time") and not proc_is_zombie(pid)


def group_members(pgid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit() and proc_pgid(int(d)) == pgid and not proc_is_zombie(int(d)):
            out.append(int(d))
    return out


class State:
    def __init__(self, root: Path):
        self.root = root
        self.path = root / "state.json"
        self.data = {"components": {}, "order": []}
        if self.path.exists():
            with contextlib.suppress(ValueError):
                self.data = json.loads(self.path.read_text())

    def save(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=2))
        os.replace(tmp, self.path)

    @property
    def components(self) -> dict:
        return self.data.setdefault("components", {})


def start_process(
    st: State,
    name: str,
    argv: list[str],
    env: dict | None = None,
    health: dict | None = None,
    *,
    preexec=None,
) -> subprocess.Popen:
    logs = st.root / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with open(logs / f"{name}.log", "ab") as lf:
        lf.write(f"--- {time.strftime('%H:%M:%S')} {' '.join(argv)}\n".encode())
        lf.flush()
        p = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=lf,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env or os.environ.copy(),
            cwd=str(st.root),
            preexec_fn=preexec,  # noqa: PLW1509 - `up` runs no threads
        )
    st.components[name] = {
        "pid": p.pid,
        "pgid": p.pid,
        "start_time": proc_start_time(p.pid),
        "argv": argv,
        "log": str(logs / f"{name}.log"),
        "health": health or {},
    }
    order = st.data.setdefault("order", [])
    if name in order:
        order.remove(name)
    order.append(name)
    st.save()
    return p


def log_tail(path: str, n: int = 30) -> str:
    try:
        return "".join(open(path, errors="replace").readlines()[-n:])
    except OSError:
        return ""


def _ours(c: dict) -> bool:
    """Is the recorded process group still ours (guards against PID reuse)?"""
    pgid = c.get("pgid")
    if not pgid:
        return False
    if component_alive(c):
        return True
    # leader gone: its group may still have members; a reused PID has another start time
    return bool(group_members(pgid)) and proc_start_time(pgid) in (None, c.get("start_time"))


def stop_components(named: list[tuple[str, dict]], quiet: bool, grace: float = 10.0) -> None:
    """SIGTERM the process groups together, wait, then SIGKILL whatever is left."""
    targets = [(n, c["pgid"]) for n, c in named if _ours(c)]
    for n, pgid in targets:
        if not quiet:
            log(f"stopping {n} (pid {pgid})")
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(group_members(g) for _, g in targets):
        time.sleep(0.1)
    for n, pgid in targets:
        if group_members(pgid):
            log(f"{n} did not stop within {grace:.0f}s; killing it")
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(group_members(g) for _, g in targets):
        time.sleep(0.1)


def cmd_down(args=None, quiet=False, force=False) -> int:
    force = force or bool(getattr(args, "force", False))
    with state_lock():
        return _down(quiet, force)


def _down(quiet: bool, force: bool) -> int:
    root = state_dir()
    st = State(root)
    comps = st.components
    if not comps and not st.data.get("real_node"):
        if not quiet:
            log(f"nothing to stop (no {root / 'state.json'})")
        return 0
    me = os.getpid()
    owner = st.data.get("owner_pid")
    if (
        owner
        and not force
        and owner not in (me, os.getppid())
        and proc_start_time(owner) is not None
        and not proc_is_zombie(owner)
    ):
        log(
            f"this devcluster ({root}) belongs to the running process {owner} (a pytest session "
            "that started it), which stops it when it ends; `down --force` stops it now"
        )
        return 1
    order = [n for n in reversed(st.data.get("order", [])) if n in comps]
    order += [n for n in comps if n not in order]
    # Clients of the API first (so they do not spin on errors), then the apiserver, then etcd.
    core = ("kube-apiserver", "etcd")
    waves = [[n for n in order if n not in core], ["kube-apiserver"], ["etcd"]]
    for wave in waves:
        named = [(n, comps[n]) for n in wave if n in comps and comps[n].get("pid") != me]
        stop_components(named, quiet)
    leftovers = {
        n: group_members(c["pgid"])
        for n, c in comps.items()
        if c.get("pid") != me and c.get("pgid")
    }
    leftovers = {n: v for n, v in leftovers.items() if v}
    for n in list(comps):
        if comps[n].get("pid") != me:
            del comps[n]
    # The real node's processes outlive their components (shims, containers): kill them by
    # cgroup, then remove its bridge, cgroups and folders, all from the record.
    node_problems = devcluster_node.cleanup(st, quiet)
    st.data["stopped_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    st.save()
    # Secrets and data go away; logs stay for post-mortems until the next `up`.
    secret_dirs = (
        "pki",
        "etcd-data",
        "jobset",
        "apiserver-certs",
        "kcm-certs",
        "scheduler-certs",
        "authn",
    )
    for p in ("kubeconfig", *secret_dirs):
        q = root / p
        if q.is_dir():
            shutil.rmtree(q, ignore_errors=True)
        elif q.exists():
            q.unlink()
    if leftovers:
        log(f"WARNING: processes still alive: {leftovers}")
        return 1
    if node_problems:
        for problem in node_problems:
            log(f"WARNING: {problem}")
        log("the real node's record stays in state.json: run `down` again to retry")
        return 1
    if not quiet:
        log("devcluster stopped; no processes left")
    return 0


# --------------------------------------------------------------------------------------
# Health checks
# --------------------------------------------------------------------------------------


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


def check_health(root: Path, c: dict) -> tuple[bool, str]:
    h = c.get("health") or {}
    if not h:
        return True, "no endpoint"
    if "unix" in h:
        return devcluster_node.unix_socket_ok(h["unix"])
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


def wait_until(desc: str, fn, timeout: float, procs: dict | None = None, interval=0.2):
    """Poll fn() until it returns a truthy value; fail early if a watched process died."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        for name, (p, logpath) in (procs or {}).items():
            if p.poll() is not None:
                raise RuntimeError(
                    f"{name} exited with code {p.returncode} while waiting for {desc}; "
                    f"log {logpath}:\n{log_tail(logpath)}"
                )
        try:
            v = fn()
        except Exception as e:
            v, last = None, e
        if v:
            return v
        time.sleep(interval)
    raise RuntimeError(f"timed out after {timeout:.0f}s waiting for {desc} (last error: {last})")


def cluster_health(root: Path) -> tuple[bool, list[tuple[str, bool, str]]]:
    st = State(root)
    rows = []
    ok = True
    comps = st.components
    if not comps:
        return False, [
            ("devcluster", False, f"not running (no components in {root / 'state.json'})")
        ]
    for name in st.data.get("order", list(comps)):
        c = comps.get(name)
        if not c:
            continue
        alive = component_alive(c)
        if not alive:
            rows.append(
                (name, False, f"process {c.get('pid')} is not running (log {c.get('log')})")
            )
            ok = False
            continue
        hok, detail = check_health(root, c)
        where = c["health"].get("url") or c["health"].get("unix") or "-"
        rows.append((name, hok, f"pid {c['pid']}, {where}: {detail[:80]}"))
        ok = ok and hok
    server = st.data.get("server")
    if server and (root / "pki" / "admin.crt").exists():
        try:
            kube = Kube(server, root / "pki")
            code, nodes = kube.get("/api/v1/nodes?labelSelector=devcluster%2Fslice")
            ready = 0
            if code == 200:
                for n in nodes.get("items", []):
                    for cond in n.get("status", {}).get("conditions", []):
                        if cond["type"] == "Ready" and cond["status"] == "True":
                            ready += 1
            nok = ready >= NODE_COUNT
            rows.append(("nodes", nok, f"{ready}/{NODE_COUNT} fake nodes Ready"))
            ok = ok and nok
            code, _ = kube.get(
                "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/devcluster-jobset-validating"
            )
            rows.append(
                (
                    "jobset-webhooks",
                    code == 200,
                    "registered" if code == 200 else f"missing (HTTP {code})",
                )
            )
            ok = ok and code == 200
        except Exception as e:
            rows.append(("api", False, str(e)))
            ok = False
    node_row = devcluster_node.health_row(root, st)
    if node_row:
        rows.append(node_row)
        ok = ok and node_row[1]
    return ok, rows


def cmd_status(args) -> int:
    root = state_dir()
    ok, rows = cluster_health(root)
    if getattr(args, "json", False):
        print(
            json.dumps(
                {
                    "healthy": ok,
                    "state_dir": str(root),
                    "kubeconfig": str(root / "kubeconfig"),
                    "components": [{"name": n, "healthy": h, "detail": d} for n, h, d in rows],
                    "real_node": State(root).data.get("real_node"),
                    "images": State(root).data.get("images"),
                }
            )
        )
        return 0 if ok else 1
    for n, h, d in rows:
        print(f"  {'OK  ' if h else 'FAIL'} {n:26s} {d}")
    print(f"devcluster: {'healthy' if ok else 'NOT healthy'} (state {root})")
    if ok:
        print(f"  export KUBECONFIG={root / 'kubeconfig'}")
    return 0 if ok else 1


# --------------------------------------------------------------------------------------
# up
# --------------------------------------------------------------------------------------


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


def node_objects() -> list[dict]:
    nodes = []
    for i in range(NODE_COUNT):
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
                "spec": {},
                "status": {"capacity": res, "allocatable": res},
            }
        )
    return nodes


def webhook_configs(bin_dir: Path, root: Path, jobset_dir: Path, port: int) -> list[dict]:
    """Upstream webhook manifests, pointed at the local webhook server by URL."""
    manifests = jobset_dir / "config" / "components" / "webhook" / "manifests.yaml"
    out = kubectl(bin_dir, root, "create", "--dry-run=client", "-o", "json", "-f", str(manifests))
    items, dec, pos = [], json.JSONDecoder(), 0
    while True:
        while pos < len(out) and out[pos].isspace():
            pos += 1
        if pos >= len(out):
            break
        obj, pos = dec.raw_decode(out, pos)
        items.extend(obj.get("items", [obj]) if obj.get("kind") == "List" else [obj])
    ca = base64.b64encode((root / "pki" / "ca.crt").read_bytes()).decode()
    result = []
    for obj in items:
        kind = obj["kind"]
        if kind not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            continue
        obj["metadata"] = {
            "name": "devcluster-jobset-"
            + ("mutating" if kind.startswith("Mutating") else "validating"),
            "labels": {"app.kubernetes.io/managed-by": "devcluster"},
        }
        for wh in obj["webhooks"]:
            path = wh["clientConfig"]["service"]["path"]
            wh["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca}
            wh["timeoutSeconds"] = 10
            if any(r.get("resources") == ["pods"] for r in wh.get("rules", [])):
                # as upstream's kustomize patch does: only JobSet pods go through the webhook
                wh["objectSelector"] = {
                    "matchExpressions": [
                        {"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"}
                    ]
                }
        result.append(obj)
    if len(result) != 2:
        raise RuntimeError(f"unexpected webhook manifests in {manifests}")
    return result


PROBE_JOBSET = {
    "apiVersion": "jobset.x-k8s.io/v1alpha2",
    "kind": "JobSet",
    "metadata": {"name": "devcluster-webhook-probe"},
    "spec": {
        "replicatedJobs": [
            {
                "name": "w",
                "replicas": 1,
                "template": {
                    "spec": {
                        "template": {
                            "spec": {
                                "restartPolicy": "Never",
                                "containers": [{"name": "c", "image": "busybox"}],
                            }
                        }
                    }
                },
            }
        ]
    },
}


def jobset_webhook_works(kube: Kube) -> bool:
    """Whether the JobSet webhooks answer (a server-side dry-run create is defaulted)."""
    code, body = kube.request(
        "POST",
        "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets?dryRun=All",
        PROBE_JOBSET,
    )
    served = isinstance(body, dict) and bool(body.get("spec", {}).get("successPolicy"))
    return code == 201 and served


def cmd_up(args) -> int:
    with state_lock():
        return _cmd_up(args)


def _cmd_up(args) -> int:
    t0 = time.monotonic()
    root = state_dir()
    ok, _ = cluster_health(root)
    if ok:
        log(f"devcluster is already running and healthy (state {root})")
        print_usage(root)
        return 0
    if State(root).components or State(root).data.get("real_node"):
        log("found a stale/unhealthy devcluster; stopping it first")
        cmd_down(quiet=True, force=True)
        if State(root).data.get("real_node"):
            die(
                f"the real node of the previous cluster in {root} could not be removed (see "
                "above); not starting over it. Fix that, then `make cluster-down` again"
            )
    bin_dir = cmd_build(argparse.Namespace(quiet=True))
    node = None
    if devcluster_node.enabled():
        node_bin = bin_dir_if_built("node")
        images = devcluster_images.cached_images(node_bin) if node_bin else None
        if not node_bin or not images:
            die("the real node's binaries or images are missing after the build")
        node = {"bin": node_bin, "images": images}
    manifest = json.loads((bin_dir / "manifest.json").read_text())
    jobset_dir = Path(manifest.get("jobset_module_dir", ""))
    crd_file = (
        jobset_dir / "config" / "components" / "crd" / "bases" / "jobset.x-k8s.io_jobsets.yaml"
    )
    if not crd_file.exists():
        jobset_dir = jobset_module_dir()
        crd_file = (
            jobset_dir / "config" / "components" / "crd" / "bases" / "jobset.x-k8s.io_jobsets.yaml"
        )

    if root.exists() and any(root.iterdir()) and not (root / "state.json").exists():
        die(f"{root} exists, is not empty and is not a devcluster state directory; not touching it")

    def on_term(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_term)
    attempts = 3
    for attempt in range(1, attempts + 1):
        # Fresh state every time (logs of the previous run are discarded here).
        if root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True)
        (root / ".gitignore").write_text("*\n")
        st = State(root)
        st.data = {
            "components": {},
            "order": [],
            "bin_dir": str(bin_dir),
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        if node:
            st.data["node_bin_dir"] = str(node["bin"])
            st.data["images"] = {n: i["ref"] for n, i in node["images"].items()}
        if args.owner_pid:
            st.data["owner_pid"] = args.owner_pid
        st.save()
        try:
            _up(st, bin_dir, crd_file, jobset_dir, args, real=node)
        except BaseException as e:
            collided = any(
                "address already in use" in log_tail(c["log"], 200) for c in st.components.values()
            )
            log(f"cluster-up failed: {e}")
            cmd_down(quiet=True, force=True)
            if isinstance(e, KeyboardInterrupt):
                raise
            if collided and attempt < attempts:
                log(f"a port was taken meanwhile; retrying with new ports ({attempt}/{attempts})")
                continue
            log(f"logs are in {root / 'logs'}")
            return 1
        break
    log(f"devcluster is up in {time.monotonic() - t0:.1f}s")
    print_usage(root)
    return 0


def print_usage(root: Path) -> None:
    st = State(root)
    print(
        f"""
  kubeconfig : {root / "kubeconfig"}
  apiserver  : {st.data.get("server")}
  kubectl    : {Path(st.data.get("bin_dir", "?")) / "kubectl"}
  logs       : {root / "logs"}

  export KUBECONFIG={root / "kubeconfig"}
  {Path(st.data.get("bin_dir", "?")) / "kubectl"} get nodes -L {ZONE_LABEL},{SLICE_LABEL}
  make cluster-status / make cluster-down
""",
        flush=True,
    )


def _up(st: State, bin_dir: Path, crd_file: Path, jobset_dir: Path, args, *, real=None) -> None:
    root = st.root
    b = lambda n: str(bin_dir / n)  # noqa: E731
    pki = root / "pki"
    t = time.monotonic()
    make_pki(pki)
    log(f"certificates and keys generated in {pki} ({time.monotonic() - t:.1f}s)")
    names = [
        "etcd",
        "etcd-peer",
        "apiserver",
        "kcm",
        "scheduler",
        "kwok",
        "kubelet",
        "webhook",
        "jobset-health",
        "authn",
    ]
    if real:
        names += ["kubelet-real", "kubelet-healthz", "coredns-health", "coredns-ready"]
    ports = dict(zip(names, free_ports(len(names)), strict=True))
    st.data["ports"] = ports
    server = f"https://127.0.0.1:{ports['apiserver']}"
    st.data["server"] = server
    st.save()
    kubeconfig = root / "kubeconfig"
    write_kubeconfig(kubeconfig, server, pki)
    env = os.environ.copy()
    env.pop("KUBECONFIG", None)
    env["HOME"] = str(root)  # keep tools away from ~/.kube, ~/.kwok

    # etcd
    etcd_url = f"http://127.0.0.1:{ports['etcd']}"
    peer_url = f"http://127.0.0.1:{ports['etcd-peer']}"
    p_etcd = start_process(
        st,
        "etcd",
        [
            b("etcd"),
            "--name=devcluster",
            f"--data-dir={root / 'etcd-data'}",
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
        env=env,
        health={"url": etcd_url + "/health"},
    )
    watched = {"etcd": (p_etcd, st.components["etcd"]["log"])}
    wait_until("etcd /health", lambda: http_ok(etcd_url + "/health")[0], 30, watched)
    log(f"etcd ready on {etcd_url}")

    # the token webhook of the short-lived credentials (devcluster_auth.py), asked by the
    # apiserver about bearer tokens that no other authenticator accepted
    devcluster_auth.prepare(root, ports["authn"])
    authn_url = f"https://127.0.0.1:{ports['authn']}/healthz"
    p_authn = start_process(
        st,
        "authn",
        [
            sys.executable,
            str(HERE / "devcluster_auth.py"),
            "serve",
            "--state-dir",
            str(root),
            "--port",
            str(ports["authn"]),
        ],
        env=env,
        health={"url": authn_url, "tls": "ca"},
    )
    watched["authn"] = (p_authn, st.components["authn"]["log"])
    wait_until(
        "token webhook /healthz",
        lambda: check_health(root, st.components["authn"])[0],
        30,
        watched,
    )

    # kube-apiserver
    p_api = start_process(
        st,
        "kube-apiserver",
        [
            b("kube-apiserver"),
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports['apiserver']}",
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
            *devcluster_auth.apiserver_flags(root),
            # Extra flags, e.g. the benchmarks' audit log and short watch timeout (off by
            # default): `{state}` stands for the state directory.
            *shlex.split(
                os.environ.get("DEVCLUSTER_APISERVER_ARGS", "").replace("{state}", str(root))
            ),
        ],
        env=env,
        health={"url": server + "/readyz", "tls": "admin"},
    )
    watched["kube-apiserver"] = (p_api, st.components["kube-apiserver"]["log"])
    kube = Kube(server, pki)
    wait_until(
        "kube-apiserver /readyz", lambda: kube.get("/readyz", timeout=2)[0] == 200, 90, watched, 0.3
    )
    log(f"kube-apiserver ready on {server} ({time.monotonic() - t:.1f}s)")

    # kube-controller-manager and kube-scheduler
    p_kcm = start_process(
        st,
        "kube-controller-manager",
        [
            b("kube-controller-manager"),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports['kcm']}",
            f"--cert-dir={root / 'kcm-certs'}",
            "--controllers=" + ",".join(KCM_CONTROLLERS),
            f"--root-ca-file={pki / 'ca.crt'}",
            "--use-service-account-credentials=false",
            "--kube-api-qps=200",
            "--kube-api-burst=400",
            "--cluster-name=devcluster",
            "--profiling=false",
        ],
        env=env,
        health={"url": f"https://127.0.0.1:{ports['kcm']}/healthz", "tls": "insecure"},
    )
    watched["kube-controller-manager"] = (p_kcm, st.components["kube-controller-manager"]["log"])
    p_sched = start_process(
        st,
        "kube-scheduler",
        [
            b("kube-scheduler"),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports['scheduler']}",
            f"--cert-dir={root / 'scheduler-certs'}",
            "--kube-api-qps=200",
            "--kube-api-burst=400",
            "--profiling=false",
        ],
        env=env,
        health={"url": f"https://127.0.0.1:{ports['scheduler']}/healthz", "tls": "insecure"},
    )
    watched["kube-scheduler"] = (p_sched, st.components["kube-scheduler"]["log"])

    # log server (the "kubelet" endpoint of every fake node, for pods/log)
    p_logs = start_process(
        st,
        "logserver",
        [
            sys.executable,
            str(Path(__file__).resolve()),
            "logserver",
            "--state-dir",
            str(root),
            "--port",
            str(ports["kubelet"]),
        ],
        env=env,
        health={"url": f"https://127.0.0.1:{ports['kubelet']}/healthz", "tls": "ca"},
    )
    watched["logserver"] = (p_logs, st.components["logserver"]["log"])

    # fake nodes + kwok
    for node in node_objects():
        code, body = kube.request("POST", "/api/v1/nodes", node)
        if code not in (200, 201):
            raise RuntimeError(f"creating node {node['metadata']['name']} failed: {code} {body}")
    p_kwok = start_process(
        st,
        "kwok",
        [
            b("kwok"),
            f"--kubeconfig={kubeconfig}",
            f"--config={STAGES_FILE}",
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            "--node-ip=127.0.0.1",
            f"--node-port={ports['kubelet']}",
            f"--server-address=127.0.0.1:{ports['kwok']}",
            "--cidr=10.244.0.0/16",
            "--node-lease-duration-seconds=40",
        ],
        env=env,
        health={"url": f"http://127.0.0.1:{ports['kwok']}/healthz"},
    )
    watched["kwok"] = (p_kwok, st.components["kwok"]["log"])

    # JobSet CRD (upstream file from the downloaded Go module) and manager
    kubectl(
        bin_dir,
        root,
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=devcluster",
        "-f",
        str(crd_file),
    )
    wait_until(
        "JobSet CRD Established",
        lambda: any(
            c["type"] == "Established" and c["status"] == "True"
            for c in kube.get(
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/jobsets.jobset.x-k8s.io"
            )[1]
            .get("status", {})
            .get("conditions", [])
        ),
        30,
        watched,
    )
    jdir = root / "jobset"
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
    p_js = start_process(
        st,
        "jobset",
        [
            b("jobset"),
            f"--config={jdir / 'config.yaml'}",
            f"--kubeconfig={kubeconfig}",
            "--metrics-bind-address=0",
            "--zap-log-level=info",
        ],
        env=env,
        health={"url": f"http://127.0.0.1:{ports['jobset-health']}/readyz"},
    )
    watched["jobset"] = (p_js, st.components["jobset"]["log"])

    # The real node starts while the JobSet manager gets ready (the image imports overlap).
    node_wait = (
        devcluster_node.start(st, real["bin"], real["images"], ports, env=env, watched=watched)
        if real
        else None
    )

    wait_until(
        "fake nodes Ready",
        lambda: (
            sum(
                1
                for n in kube.get("/api/v1/nodes?labelSelector=devcluster%2Fslice")[1].get(
                    "items", []
                )
                for c in n.get("status", {}).get("conditions", [])
                if c["type"] == "Ready" and c["status"] == "True"
            )
            >= NODE_COUNT
        ),
        60,
        watched,
    )
    log(f"{NODE_COUNT} kwok nodes Ready ({time.monotonic() - t:.1f}s)")
    wait_until(
        "JobSet manager /readyz",
        lambda: http_ok(f"http://127.0.0.1:{ports['jobset-health']}/readyz")[0],
        90,
        watched,
        0.3,
    )
    for obj in webhook_configs(bin_dir, root, jobset_dir, ports["webhook"]):
        plural = (
            "mutatingwebhookconfigurations"
            if obj["kind"].startswith("Mutating")
            else "validatingwebhookconfigurations"
        )
        code, body = kube.request("POST", f"/apis/admissionregistration.k8s.io/v1/{plural}", obj)
        if code not in (200, 201):
            raise RuntimeError(f"creating {plural} failed: {code} {body}")

    wait_until(
        "JobSet webhooks answering (server-side dry-run)",
        lambda: jobset_webhook_works(kube),
        60,
        watched,
        0.3,
    )
    log(
        f"JobSet {manifest_version(bin_dir, 'jobset')} manager and webhooks ready "
        f"(https://127.0.0.1:{ports['webhook']}) ({time.monotonic() - t:.1f}s)"
    )
    for name in ("kube-controller-manager", "kube-scheduler", "logserver", "kwok"):
        c = st.components[name]
        wait_until(f"{name} health", lambda c=c: check_health(root, c)[0], 60, watched, 0.3)
    wait_until(
        "default ServiceAccount",
        lambda: kube.get("/api/v1/namespaces/default/serviceaccounts/default")[0] == 200,
        30,
        watched,
    )
    if node_wait:
        node_wait()
    if args.owner_pid:
        start_process(
            st,
            "watchdog",
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "watchdog",
                "--state-dir",
                str(root),
                "--owner-pid",
                str(args.owner_pid),
            ],
            env=env,
        )
    st.data["ready_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    st.save()


def manifest_version(bin_dir: Path, name: str) -> str:
    if name == "jobset":
        return gomod_require(ADDONS_MOD / "go.mod", "sigs.k8s.io/jobset")
    return ""


# --------------------------------------------------------------------------------------
# restart: stop one component and start it again (fault tests)
# --------------------------------------------------------------------------------------

#: What `restart` may restart (etcd and the real node's parts are not among them).
RESTARTABLE = (
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
    "jobset",
    "logserver",
    "authn",
)


def cmd_restart(args) -> int:
    with state_lock():
        return restart_component(args.component, kill=args.kill, down_seconds=args.down)


def restart_component(name: str, *, kill: bool = False, down_seconds: float = 0.0) -> int:
    """Stop a component (SIGTERM and a grace period, or SIGKILL: a crash), keep it down for
    ``down_seconds``, start it again with the same command line and port, and wait until it
    is healthy again (the JobSet manager: until its webhooks answer)."""
    if name not in RESTARTABLE:
        die(f"cannot restart {name!r}; restartable: {', '.join(RESTARTABLE)}")
    t = time.monotonic()
    root = state_dir()
    st = State(root)
    c = st.components.get(name)
    if not c or not _ours(c):
        die(f"{name} is not running in {root} (start the cluster with `up`)")
    if kill:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(c["pgid"], signal.SIGKILL)
        deadline = time.monotonic() + 10
        while group_members(c["pgid"]) and time.monotonic() < deadline:
            time.sleep(0.05)
    else:
        stop_components([(name, c)], quiet=True)
    if group_members(c["pgid"]):
        die(f"{name} (pid {c['pgid']}) did not stop")
    time.sleep(max(0.0, down_seconds))
    env = os.environ.copy()
    env.pop("KUBECONFIG", None)
    env["HOME"] = str(root)  # as `up` starts it
    order = list(st.data.get("order", []))
    p = start_process(st, name, c["argv"], env=env, health=c.get("health"))
    st.data["order"] = order  # `down` stops it where it always stood
    st.save()
    watched = {name: (p, st.components[name]["log"])}
    wait_until(f"{name} healthy", lambda: check_health(root, st.components[name])[0], 120, watched)
    if name in ("jobset", "kube-apiserver"):
        kube = Kube(st.data["server"], root / "pki")
        wait_until("JobSet webhooks answering", lambda: jobset_webhook_works(kube), 120, watched)
    log(f"{name} {'killed' if kill else 'stopped'} and restarted in {time.monotonic() - t:.1f}s")
    return 0


# --------------------------------------------------------------------------------------
# watchdog: tears the cluster down when the process that started it goes away
# --------------------------------------------------------------------------------------


def cmd_watchdog(args) -> int:
    os.environ["DEVCLUSTER_STATE_DIR"] = args.state_dir
    owner = args.owner_pid
    owner_start = proc_start_time(owner)
    while True:
        time.sleep(2)
        if proc_start_time(owner) != owner_start or proc_is_zombie(owner):
            log(f"owner process {owner} is gone; stopping the devcluster")
            return cmd_down(quiet=False, force=True)


# --------------------------------------------------------------------------------------
# logserver: answers the kubelet containerLogs API for the fake nodes
# --------------------------------------------------------------------------------------


def cmd_logserver(args) -> int:
    root = Path(args.state_dir)
    pki = root / "pki"
    st = State(root)
    kube = Kube(st.data["server"], pki)

    def pod_logs(ns: str, pod: str, container: str):
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

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

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
                return self.send(
                    404, b"not found (devcluster log server serves only /containerLogs)"
                )
            _, ns, pod, container = parts
            code, ann, extra = pod_logs(ns, pod, container)
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
            follow = q.get("follow", ["false"])[0] == "true"
            if not follow:
                return self.send(200, body)
            # follow: stream the lines, then keep the stream open while the container runs
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
                    code, _, extra2 = pod_logs(ns, pod, container)
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

    httpd = Server(("127.0.0.1", args.port), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(pki / "kubelet.crt"), str(pki / "kubelet.key"))
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    signal.signal(signal.SIGTERM, lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
    log(f"log server listening on https://127.0.0.1:{args.port}")
    with contextlib.suppress(KeyboardInterrupt):
        httpd.serve_forever()
    return 0


# --------------------------------------------------------------------------------------


def cmd_images(args) -> int:
    devcluster_node.setup(quiet=True)
    images = devcluster_images.build(build_bundle("node", quiet=True), quiet=args.json)
    if args.json:
        print(json.dumps(images, indent=2))
        return 0
    for name, image in images.items():
        print(f"  {name:8s} {image['ref']:32s} {image['size'] / 1e6:6.0f} MB  {image['archive']}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="devcluster", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("build", help="build (or reuse cached) binaries")
    up = sub.add_parser("up", help="start a fresh cluster in .devcluster/")
    up.add_argument(
        "--owner-pid",
        type=int,
        default=0,
        help="stop the cluster automatically when this process exits (used by the pytest plugin)",
    )
    dn = sub.add_parser("down", help="stop every process started by `up`")
    dn.add_argument(
        "--force", action="store_true", help="also stop a cluster owned by a running pytest session"
    )
    s = sub.add_parser("status", help="report the health of every component")
    s.add_argument("--json", action="store_true")
    sub.add_parser("bin-dir", help="print the cached binary directory (builds if needed)")
    sub.add_parser(
        "setup", help="install the Debian packages the real node needs (runc, CNI, rootfs tools)"
    )
    im = sub.add_parser(
        "images", help="build (or reuse) the real node's images and print their archives"
    )
    im.add_argument("--json", action="store_true")
    ns = sub.add_parser("node-ns", help=argparse.SUPPRESS)
    ns.add_argument("--state-dir", required=True)
    ls = sub.add_parser("logserver", help=argparse.SUPPRESS)
    ls.add_argument("--state-dir", required=True)
    ls.add_argument("--port", type=int, required=True)
    rs = sub.add_parser("restart", help="stop one component and start it again (fault tests)")
    rs.add_argument("component", choices=RESTARTABLE)
    rs.add_argument("--kill", action="store_true", help="SIGKILL it (a crash) instead of SIGTERM")
    rs.add_argument("--down", type=float, default=0.0, help="seconds to keep it stopped")
    wd = sub.add_parser("watchdog", help=argparse.SUPPRESS)
    wd.add_argument("--state-dir", required=True)
    wd.add_argument("--owner-pid", type=int, required=True)
    args = ap.parse_args(argv)
    if args.cmd == "build":
        cmd_build(args)
        return 0
    if args.cmd == "bin-dir":
        print(build_bundle("control-plane", quiet=True))
        return 0
    if args.cmd == "setup":
        devcluster_node.setup()
        return 0
    if args.cmd == "images":
        return cmd_images(args)
    if args.cmd == "node-ns":
        return devcluster_node.cmd_node_ns(args)
    return {
        "up": cmd_up,
        "down": cmd_down,
        "status": cmd_status,
        "logserver": cmd_logserver,
        "restart": cmd_restart,
        "watchdog": cmd_watchdog,
    }[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
