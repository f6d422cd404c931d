"""Processes and their record: ``state.json``, starting a component in its own session,
health waits, stopping exactly the process groups that were recorded, the per-state lock."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from .common import cache_root, log, state_dir

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


def _dead(stat: str) -> bool:
    """Whether the process or thread of a ``stat`` file has exited (or is gone)."""
    try:
        with open(stat) as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


def proc_is_zombie(pid: int) -> bool:
    return _dead(f"/proc/{pid}/stat")


def component_alive(c: dict) -> bool:
    pid = c.get("pid")
    if not pid:
        return False
    st = proc_start_time(pid)
    return st is not None and st == c.get("start_time") and not proc_is_zombie(pid)


def proc_exiting(pid: int) -> bool:
    """Is a zombie leader's thread group still exiting? A SIGKILLed multi-threaded process
    (Go) shows its leader as ``Z`` while its other threads still unwind and still hold its
    files: its listening sockets among them (a restart that binds the same port then fails)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    return any(not _dead(f"/proc/{pid}/task/{t}/stat") for t in tasks if t != str(pid))


def group_members(pgid: int) -> list[int]:
    """The live processes of a group: a zombie leader whose threads still exit counts."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or proc_pgid(int(d)) != pgid:
            continue
        if not proc_is_zombie(int(d)) or proc_exiting(int(d)):
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


def ours(c: dict) -> bool:
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
    targets = [(n, c["pgid"]) for n, c in named if ours(c)]
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


class Launch:
    """What one ``up`` attempt shares between the components it starts: the record, the
    binaries, the ports, the environment, and the processes to watch while waiting (a
    component that exits while ``up`` waits for anything fails the attempt at once)."""

    def __init__(self, st: State, bin_dir: Path, ports: dict, env: dict):
        self.st = st
        self.root = st.root
        self.pki = st.root / "pki"
        self.kubeconfig = st.root / "kubeconfig"
        self.bin_dir = bin_dir
        self.ports = ports
        self.env = env
        self.watched: dict = {}
        self.t0 = time.monotonic()
        self.kube = None  # the admin client, once the apiserver answers

    def bin(self, name: str) -> str:
        return str(self.bin_dir / name)

    def elapsed(self) -> str:
        return f"{time.monotonic() - self.t0:.1f}s"

    def start(self, name: str, argv: list[str], health: dict | None = None, **kw):
        """Start a component, record it, and watch it for the rest of ``up``."""
        p = start_process(self.st, name, argv, env=kw.pop("env", self.env), health=health, **kw)
        self.watched[name] = (p, self.st.components[name]["log"])
        return p

    def wait(self, desc: str, fn, timeout: float, interval: float = 0.2):
        return wait_until(desc, fn, timeout, self.watched, interval)
