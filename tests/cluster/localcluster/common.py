"""Paths, logging and the environment knobs every part of the devcluster shares."""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

#: tests/cluster: the wrapper Go modules, the kwok stages, the entry script live here.
HERE = Path(__file__).resolve().parent.parent
REPO = HERE.parent.parent
#: The command-line entry (``python3 tests/cluster/devcluster.py ...``); the components
#: that are our own Python programs (log server, watchdog, node-ns) are started through it.
ENTRY = HERE / "devcluster.py"
K8S_MOD = HERE / "k8s"
ADDONS_MOD = HERE / "addons"
KUEUE_MOD = HERE / "kueue"
CONTAINERD_MOD = HERE / "containerd"
NODETOOLS_MOD = HERE / "nodetools"
STAGES_FILE = HERE / "kwok-stages.yaml"


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


def env_flag(name: str, default: bool = True) -> bool:
    """A boolean knob: ``0``/``false``/``no``/``off`` turn it off."""
    value = os.environ.get(name)
    if value is None or not value.strip():
        return default
    return value.strip().lower() not in ("0", "false", "no", "off")


def component_env(root: Path) -> dict:
    """The environment every component starts with (and restarts with)."""
    env = os.environ.copy()
    env.pop("KUBECONFIG", None)
    env["HOME"] = str(root)  # keep tools away from ~/.kube, ~/.kwok
    # The Go components collect garbage less often: memory this machine has, for CPU the
    # suite needs (the API server's collector took 9.4 % of its CPU at the default 100 and
    # 3.3 % at 400, its heap 0.3 GB and 0.6 GB). A value the caller set stands.
    env.setdefault("GOGC", "400")
    return env


def stamp() -> str:
    """The current UTC time as state.json records it."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@contextlib.contextmanager
def exclusive(lock_file: Path, what: str) -> Iterator[None]:
    """Hold ``lock_file`` (an flock, across processes and checkouts); say so when ``what`` (a
    build) is already running elsewhere and this one waits for it."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_file, "w") as lockf:
        try:
            fcntl.flock(lockf, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"another {what} is running; waiting for it ...")
            fcntl.flock(lockf, fcntl.LOCK_EX)
        yield
