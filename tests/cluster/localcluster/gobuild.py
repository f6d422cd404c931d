"""The Go build: what is compiled (plans), the cache keys, and building a bundle into the
hash-keyed cache (``~/.cache/airflow-provider-jobset/<bundle>/<key>/``, under a file lock)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from .common import (
    ADDONS_MOD,
    CONTAINERD_MOD,
    K8S_MOD,
    KUEUE_MOD,
    NODETOOLS_MOD,
    REPO,
    cache_root,
    die,
    exclusive,
    fmt_secs,
    log,
)
from .procs import log_tail

# -buildvcs=false: the wrapper modules live inside this git checkout; stamping its commit
# would make binaries differ per commit and fails on checkouts git refuses to read.
GOFLAGS = "-mod=readonly -buildvcs=false"


# Bump when the build recipe below changes in a way that must invalidate caches.
# 4: no -trimpath, and `notest` for every item that compiles k8s.io/apimachinery (see
# SHARED_TAGS and go_build_args): the four wrappers share their compiled packages.
BUILD_RECIPE = "4"


def find_go() -> str:
    go = os.environ.get("GO") or shutil.which("go")
    if not go and os.path.exists("/usr/local/go/bin/go"):
        go = "/usr/local/go/bin/go"
    if not go:
        die("the Go toolchain (go >= 1.26) is required to build the devcluster binaries")
    return go


def go_env() -> dict:
    env = os.environ.copy()
    # The compiler's own garbage collector runs less often: a cold build of these modules takes
    # ~15 % less time (k8s.io/client-go and apimachinery on 2 cores: 110 s against 129 s at
    # the default 100), for memory this machine has. It changes no output (not in the key).
    env.setdefault("GOGC", "400")
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
#: The tag that decides which files of a shared package are compiled: k8s.io/apimachinery's
#: meta/v1 and intstr have fuzzer helpers under `//go:build !notest`, and with them left in,
#: meta/v1 and every package above it (k8s.io/api, client-go, apiserver, controller-runtime,
#: ...) would be compiled once for the Kubernetes binaries and again for kwok, JobSet, Kueue,
#: CoreDNS and containerd. `selinux` changes no file of any module the wrappers use.
SHARED_TAGS = "notest"


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
            tags=SHARED_TAGS,
            ldflags=["-s", "-w", "-buildid="],
        ),
        dict(
            name="jobset",
            mod=ADDONS_MOD,
            pkg="sigs.k8s.io/jobset",
            tags=SHARED_TAGS,
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
    ctags = "urfave_cli_no_docs," + SHARED_TAGS
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
        dict(name="coredns", mod=NODETOOLS_MOD, pkg="./coredns", tags=SHARED_TAGS, ldflags=plain),
        dict(
            name="kubelet",
            mod=K8S_MOD,
            pkg="k8s.io/kubernetes/cmd/kubelet",
            tags=K8S_TAGS,
            ldflags=k8s_ldflags(),
        ),
    ]


def kueue_plan() -> list[dict]:
    """Kueue's manager (its own wrapper: Kueue v0.17.0 builds only with k8s.io/* 0.35, see
    tests/cluster/kueue/go.mod; what else it shares with tests/cluster/k8s is replaced by that
    wrapper's versions)."""
    kver = gomod_require(KUEUE_MOD / "go.mod", "sigs.k8s.io/kueue")
    ldflags = ["-s", "-w", "-buildid=", f"-X sigs.k8s.io/kueue/pkg/version.GitVersion={kver}"]
    return [
        dict(
            name="kueue",
            mod=KUEUE_MOD,
            pkg="sigs.k8s.io/kueue/cmd/kueue",
            tags=SHARED_TAGS,
            ldflags=ldflags,
        )
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
        # measured 2026-12-02, empty GOCACHE, 2 cores at load ~3: 7m23s (9m40s in CI before
        # the wrappers shared their versions)
        estimate="6-8 min on an idle 2-core machine, 20+ min on a busy one",
        # where the upstream JobSet manifests live (read at `up` time, never copied)
        extra=lambda: {"jobset_module_dir": str(jobset_module_dir())},
    ),
    "node": dict(
        root="node-bin",
        mods=(K8S_MOD, CONTAINERD_MOD, NODETOOLS_MOD),
        plan=node_plan,
        what="the real node's kubelet, containerd and CoreDNS",
        # 2m04s after the control plane (the kubelet and most of what containerd and CoreDNS
        # compile come from its build cache; 3m34s in CI before they shared its versions)
        estimate="2-3 min after the control plane's build, far longer without it",
    ),
    "kueue": dict(
        root="kueue-bin",
        mods=(KUEUE_MOD,),
        plan=kueue_plan,
        what="the Kueue manager",
        # 3m29s after the control plane (4m15s in CI before): Kueue's k8s.io/* 0.35 set,
        # controller-runtime and its integrations' APIs are compiled for it alone
        estimate="3-5 min on a 2-core machine after the control plane's build",
        # where the upstream Kueue manifests live (read at `up` time, never copied)
        extra=lambda: {"kueue_module_dir": str(module_dir("sigs.k8s.io/kueue", KUEUE_MOD))},
    ),
}


def bundle_root(bundle: str) -> Path:
    return cache_root().parent / BUNDLES[bundle]["root"]


def go_build_args(item: dict, out: Path, jobs: int) -> list[str]:
    # No -trimpath: with it, a compiled package's cache key names the module version that
    # the wrapper's requirement graph selected, not the source that a `replace` puts in its
    # place, so a package that two wrappers build from the same source (the other wrappers
    # replace what they share with tests/cluster/k8s by that wrapper's versions) would still
    # be compiled once per wrapper. Without it the key names the source directory in
    # GOMODCACHE, the same for every wrapper. The binaries then carry GOMODCACHE paths in
    # their stack traces; -s -w still drop the symbol table and DWARF.
    args = [find_go(), "build", "-p", str(jobs), "-v"]
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


def module_dir(module: str, mod: Path = ADDONS_MOD) -> Path:
    """Directory of a downloaded module of the wrapper ``mod`` (GOMODCACHE)."""
    out = subprocess.run(
        [find_go(), "mod", "download", "-json", module],
        check=False,
        cwd=mod,
        env=go_env(),
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        die(f"go mod download {module} failed:\n{out.stdout}\n{out.stderr}")
    return Path(json.loads(out.stdout)["Dir"])


def jobset_module_dir() -> Path:
    """Directory of the downloaded sigs.k8s.io/jobset module (GOMODCACHE)."""
    return module_dir("sigs.k8s.io/jobset")


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


def build_lock():
    """One Go build at a time on this machine, across checkouts."""
    return exclusive(cache_root() / ".build.lock", "devcluster build")


def _warm(bundle: str, quiet: bool) -> Path | None:
    existing = bin_dir_if_built(bundle)
    if existing and not quiet:
        log(f"{bundle} binaries are cached in {existing} (warm, nothing to build)")
    return existing


def _compile(item: dict, out_dir: Path, jobs: int, t0: float) -> float:
    """``go build`` one component into ``out_dir``, with a progress line every 30 s;
    return its build time."""
    t1 = time.monotonic()
    blog = out_dir / f"build-{item['name']}.log"
    cmd = go_build_args(item, out_dir / item["name"], jobs)
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
    return round(time.monotonic() - t1, 1)


def build_bundle(bundle: str, quiet: bool = False) -> Path:
    """Build a bundle (or reuse its cached build) and return its binary directory."""
    key, info = cache_key(bundle)
    root = bundle_root(bundle)
    root.mkdir(parents=True, exist_ok=True)
    final = root / key
    existing = _warm(bundle, quiet)
    if existing:
        return existing
    with build_lock():
        existing = _warm(bundle, quiet)
        if existing:
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
            log(f"[{i}/{len(plan)}] building {item['name']} ({item['pkg']}) ...")
            times[item["name"]] = _compile(item, tmp, jobs, t0)
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
        manifest.update(BUNDLES[bundle].get("extra", dict)())
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2))
        if final.exists():
            shutil.rmtree(final)
        os.rename(tmp, final)
        prune_cache(root, keep=final)
        log(f"cold build finished in {fmt_secs(manifest['total_seconds'])}: {final}")
        return final
