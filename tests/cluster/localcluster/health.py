"""``status``: the health of every recorded component, the fake nodes, the webhooks and the
real node (exit 1 if anything is unhealthy)."""

from __future__ import annotations

import json
from pathlib import Path

from . import jobset, kueue, node
from .common import state_dir
from .controlplane import FAKE_NODE_COUNT, fake_nodes_ready
from .kube import Kube, check_health
from .procs import State, component_alive


def component_rows(root: Path, st: State) -> list[tuple[str, bool, str]]:
    rows = []
    comps = st.components
    for name in st.data.get("order", list(comps)):
        c = comps.get(name)
        if not c:
            continue
        if not component_alive(c):
            rows.append(
                (name, False, f"process {c.get('pid')} is not running (log {c.get('log')})")
            )
            continue
        hok, detail = check_health(root, c)
        where = c["health"].get("url") or c["health"].get("unix") or "-"
        rows.append((name, hok, f"pid {c['pid']}, {where}: {detail[:80]}"))
    return rows


def api_rows(root: Path, st: State) -> list[tuple[str, bool, str]]:
    """What the API says: the fake nodes Ready, the webhooks registered."""
    server = st.data.get("server")
    if not server or not (root / "pki" / "admin.crt").exists():
        return []
    rows = []
    try:
        kube = Kube(server, root / "pki")
        ready = fake_nodes_ready(kube)
        rows.append(
            ("nodes", ready >= FAKE_NODE_COUNT, f"{ready}/{FAKE_NODE_COUNT} fake nodes Ready")
        )
        if "jobset" in st.components:
            rows.append(jobset.health_row(kube))
        if "kueue" in st.components:
            rows.append(kueue.health_row(kube))
    except Exception as e:
        rows.append(("api", False, str(e)))
    return rows


def cluster_health(root: Path) -> tuple[bool, list[tuple[str, bool, str]]]:
    st = State(root)
    if not st.components:
        return False, [
            ("devcluster", False, f"not running (no components in {root / 'state.json'})")
        ]
    rows = component_rows(root, st) + api_rows(root, st)
    node_row = node.health_row(root, st)
    if node_row:
        rows.append(node_row)
    return all(ok for _, ok, _ in rows), rows


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
