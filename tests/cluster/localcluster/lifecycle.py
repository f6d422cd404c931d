"""``up``, ``down``, ``restart`` and ``watchdog``: the order components start and stop in,
the retry on a port taken meanwhile, and the cleanup guarantees (``down`` stops exactly the
recorded process groups, removes the real node's traces and every key and certificate)."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import controlplane, images, jobset, kueue, node, node_host
from .common import ENTRY, component_env, die, log, stamp, state_dir
from .controlplane import SLICE_LABEL, ZONE_LABEL
from .gobuild import bin_dir_if_built, build_bundle
from .health import cluster_health
from .kube import Kube, check_health
from .pki import make_pki, write_kubeconfig
from .procs import (
    Launch,
    State,
    free_ports,
    group_members,
    log_tail,
    ours,
    proc_is_zombie,
    proc_start_time,
    start_process,
    state_lock,
    stop_components,
    wait_until,
)

#: The control plane's ports, in the order `up` picks them (the real node's follow).
PORT_NAMES = [
    "etcd",
    "etcd-peer",
    "apiserver",
    "kcm",
    "scheduler",
    "kwok",
    "kubelet",
    "authn",
]
#: What `down` deletes (keys, certificates, data); `logs/` stays for a post-mortem.
SECRET_DIRS = (
    "pki",
    "etcd-data",
    "jobset",
    "kueue",
    "apiserver-certs",
    "kcm-certs",
    "scheduler-certs",
    "authn",
)


def cmd_build(args) -> Path:
    """Build (or reuse) the control plane, unless DEVCLUSTER_KUEUE=0 Kueue, and unless
    DEVCLUSTER_REAL_NODE=0 the real node's binaries and images; return the control plane's
    binary directory."""
    quiet = getattr(args, "quiet", False)
    imaging = None
    if node.enabled():
        node_host.setup(quiet=True)
        # The images but pause need no Go binary: mostly downloads, unpacking and archives, so
        # they are built beside the Go builds (a cold run's ~2-3 min off its critical path).
        # Their failure (``die``'s SystemExit too) is raised here by ``result()``.
        imaging = ThreadPoolExecutor(1, thread_name_prefix="images").submit(images.build_early)
    bin_dir = build_bundle("control-plane", quiet)
    if kueue.enabled():
        build_bundle("kueue", quiet)
    if imaging is not None:
        node_bin = build_bundle("node", quiet)
        imaging.result()
        images.build(node_bin, quiet)
    return bin_dir


# --------------------------------------------------------------------------------------
# up
# --------------------------------------------------------------------------------------


def cmd_up(args) -> int:
    with state_lock():
        return _cmd_up(args)


def _stop_stale(root: Path) -> None:
    log("found a stale/unhealthy devcluster; stopping it first")
    cmd_down(quiet=True, force=True)
    if State(root).data.get("real_node"):
        die(
            f"the real node of the previous cluster in {root} could not be removed (see "
            "above); not starting over it. Fix that, then `make cluster-down` again"
        )


def _real_node_inputs() -> dict | None:
    if not node.enabled():
        return None
    node_bin = bin_dir_if_built("node")
    cached = images.cached_images(node_bin) if node_bin else None
    if not node_bin or not cached:
        die("the real node's binaries or images are missing after the build")
    return {"bin": node_bin, "images": cached}


def _fresh_state(root: Path, bin_dir: Path, real: dict | None, owner_pid: int) -> State:
    """An empty state folder (the logs of the previous run are discarded here)."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    (root / ".gitignore").write_text("*\n")
    st = State(root)
    st.data = {"components": {}, "order": [], "bin_dir": str(bin_dir), "started_at": stamp()}
    if real:
        st.data["node_bin_dir"] = str(real["bin"])
        st.data["images"] = {n: i["ref"] for n, i in real["images"].items()}
    if owner_pid:
        st.data["owner_pid"] = owner_pid
    st.save()
    return st


def _cmd_up(args) -> int:
    t0 = time.monotonic()
    root = state_dir()
    ok, _ = cluster_health(root)
    if ok:
        log(f"devcluster is already running and healthy (state {root})")
        print_usage(root)
        return 0
    if State(root).components or State(root).data.get("real_node"):
        _stop_stale(root)
    bin_dir = cmd_build(argparse.Namespace(quiet=True))
    real = _real_node_inputs()
    jobset_dir = jobset.module_dir(bin_dir) if jobset.enabled() else None
    kueue_bin = bin_dir_if_built("kueue") if kueue.enabled() else None
    if kueue.enabled() and not kueue_bin:
        die("the Kueue binary is missing after the build")
    if root.exists() and any(root.iterdir()) and not (root / "state.json").exists():
        die(f"{root} exists, is not empty and is not a devcluster state directory; not touching it")

    def on_term(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_term)
    attempts = 3
    for attempt in range(1, attempts + 1):
        st = _fresh_state(root, bin_dir, real, args.owner_pid)
        if kueue_bin:
            st.data["kueue_bin_dir"] = str(kueue_bin)
            st.save()
        try:
            _up(st, bin_dir, jobset_dir, args, real=real, kueue_bin=kueue_bin)
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


def _launch(st: State, bin_dir: Path, real: dict | None, with_kueue: bool) -> Launch:
    """PKI, ports and kubeconfig of one attempt."""
    root = st.root
    t = time.monotonic()
    make_pki(root / "pki")
    log(f"certificates and keys generated in {root / 'pki'} ({time.monotonic() - t:.1f}s)")
    names = list(PORT_NAMES)
    if jobset.enabled():  # in the order ports were always picked: webhook, health, authn
        names[-1:-1] = jobset.PORT_NAMES
    names += node.PORT_NAMES if real else []
    names += kueue.PORT_NAMES if with_kueue else []
    ports = dict(zip(names, free_ports(len(names)), strict=True))
    st.data["ports"] = ports
    server = f"https://127.0.0.1:{ports['apiserver']}"
    st.data["server"] = server
    st.save()
    write_kubeconfig(root / "kubeconfig", server, root / "pki")
    up = Launch(st, bin_dir, ports, component_env(root))
    up.t0 = t
    return up


def _up(
    st: State, bin_dir: Path, jobset_dir: Path | None, args, *, real=None, kueue_bin=None
) -> None:
    """Start every component in order; raise if any of them fails or exits."""
    up = _launch(st, bin_dir, real, kueue_bin is not None)
    etcd_url = controlplane.start_etcd(up)
    controlplane.start_authn(up)
    controlplane.start_apiserver(up, etcd_url)
    controlplane.start_kcm_and_scheduler(up)
    controlplane.start_logserver(up)
    controlplane.start_kwok(up)
    if jobset_dir:
        jobset.install_crd(up, jobset_dir)
        jobset.start_manager(up)
    # The real node starts while the JobSet manager gets ready (the image imports overlap).
    node_wait = node.start(up, real["bin"], real["images"]) if real else None
    if kueue_bin:
        kueue_dir = kueue.kueue_dir(kueue_bin)
        kueue.install_crds(up, kueue_dir)
        kueue.start_manager(up, kueue_bin)
    controlplane.wait_fake_nodes(up)
    if jobset_dir:
        jobset.finish(up, jobset_dir)
    if kueue_bin:
        kueue.finish(up, kueue_dir)
    controlplane.wait_healthy(up)
    if node_wait:
        node_wait()
    if args.owner_pid:
        argv = [sys.executable, str(ENTRY), "watchdog", "--state-dir", str(st.root)]
        start_process(st, "watchdog", [*argv, "--owner-pid", str(args.owner_pid)], env=up.env)
    st.data["ready_at"] = stamp()
    st.save()


# --------------------------------------------------------------------------------------
# down
# --------------------------------------------------------------------------------------


def cmd_down(args=None, quiet=False, force=False) -> int:
    force = force or bool(getattr(args, "force", False))
    with state_lock():
        return _down(quiet, force)


def _owned_elsewhere(st: State, force: bool) -> bool:
    """Whether a running pytest session (not us, not our parent) owns the cluster."""
    owner = st.data.get("owner_pid")
    if (
        owner
        and not force
        and owner not in (os.getpid(), os.getppid())
        and proc_start_time(owner) is not None
        and not proc_is_zombie(owner)
    ):
        log(
            f"this devcluster ({st.root}) belongs to the running process {owner} (a pytest "
            "session that started it), which stops it when it ends; `down --force` stops it now"
        )
        return True
    return False


def _stop_all(st: State, quiet: bool) -> dict:
    """Stop every recorded component in waves; return the process groups still alive."""
    me, comps = os.getpid(), st.components
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
    for n in list(comps):
        if comps[n].get("pid") != me:
            del comps[n]
    return {n: v for n, v in leftovers.items() if v}


def _down(quiet: bool, force: bool) -> int:
    root = state_dir()
    st = State(root)
    if not st.components and not st.data.get("real_node"):
        if not quiet:
            log(f"nothing to stop (no {root / 'state.json'})")
        return 0
    if _owned_elsewhere(st, force):
        return 1
    leftovers = _stop_all(st, quiet)
    # The real node's processes outlive their components (shims, containers): kill them by
    # cgroup, then remove its bridge, cgroups and folders, all from the record.
    node_problems = node.cleanup(st, quiet)
    st.data["stopped_at"] = stamp()
    st.save()
    # Secrets and data go away; logs stay for post-mortems until the next `up`.
    for p in ("kubeconfig", *SECRET_DIRS):
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
    "kueue",
)


def cmd_restart(args) -> int:
    with state_lock():
        return restart_component(args.component, kill=args.kill, down_seconds=args.down)


def _stop_one(name: str, c: dict, kill: bool) -> None:
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
    if not c or not ours(c):
        die(f"{name} is not running in {root} (start the cluster with `up`)")
    _stop_one(name, c, kill)
    time.sleep(max(0.0, down_seconds))
    order = list(st.data.get("order", []))
    p = start_process(st, name, c["argv"], env=component_env(root), health=c.get("health"))
    st.data["order"] = order  # `down` stops it where it always stood
    st.save()
    watched = {name: (p, st.components[name]["log"])}
    wait_until(f"{name} healthy", lambda: check_health(root, st.components[name])[0], 120, watched)
    if name in ("jobset", "kube-apiserver") and "jobset" in st.components:
        kube = Kube(st.data["server"], root / "pki")
        wait_until("JobSet webhooks answering", lambda: jobset.webhook_works(kube), 120, watched)
    if name in ("kueue", "kube-apiserver") and "kueue" in st.components:
        kube = Kube(st.data["server"], root / "pki")
        wait_until("Kueue webhooks answering", lambda: kueue.webhook_works(kube), 120, watched)
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
