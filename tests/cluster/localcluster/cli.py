"""The command line of ``tests/cluster/devcluster.py``: build, up, down, status, restart,
bin-dir, setup, images, and the components that are our own programs (logserver,
watchdog, node-ns)."""

from __future__ import annotations

import argparse
import json

from . import images, kueue, lifecycle, node_host
from .gobuild import build_bundle
from .health import cmd_status
from .logserver import cmd_logserver
from .node_config import cmd_node_ns

USAGE = """devcluster: a real, Docker-free Kubernetes control plane with the upstream
JobSet controller, for tests and the demo.

Standard library only (runs with the system python3, no venv). Needs the Go
toolchain (for `build`) and the `openssl` CLI (for `up`).

    python3 tests/cluster/devcluster.py build    # build/cached binaries (cold: 8-30 min)
    python3 tests/cluster/devcluster.py up       # start the cluster in .devcluster/
    python3 tests/cluster/devcluster.py status   # health of every component
    python3 tests/cluster/devcluster.py down     # stop every process that `up` started

See tests/cluster/README.md.
"""


def cmd_images(args) -> int:
    node_host.setup(quiet=True)
    built = images.build(build_bundle("node", quiet=True), quiet=args.json)
    if args.json:
        print(json.dumps(built, indent=2))
        return 0
    for name, image in built.items():
        print(f"  {name:8s} {image['ref']:32s} {image['size'] / 1e6:6.0f} MB  {image['archive']}")
    return 0


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="devcluster", description=USAGE, formatter_class=argparse.RawDescriptionHelpFormatter
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
    kx = sub.add_parser("kueue-exec", help=argparse.SUPPRESS)
    kx.add_argument("--state-dir", required=True)
    kx.add_argument("argv", nargs=argparse.REMAINDER)
    ls = sub.add_parser("logserver", help=argparse.SUPPRESS)
    ls.add_argument("--state-dir", required=True)
    ls.add_argument("--port", type=int, required=True)
    rs = sub.add_parser("restart", help="stop one component and start it again (fault tests)")
    rs.add_argument("component", choices=lifecycle.RESTARTABLE)
    rs.add_argument("--kill", action="store_true", help="SIGKILL it (a crash) instead of SIGTERM")
    rs.add_argument("--down", type=float, default=0.0, help="seconds to keep it stopped")
    wd = sub.add_parser("watchdog", help=argparse.SUPPRESS)
    wd.add_argument("--state-dir", required=True)
    wd.add_argument("--owner-pid", type=int, required=True)
    return ap


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if args.cmd == "build":
        lifecycle.cmd_build(args)
        return 0
    if args.cmd == "bin-dir":
        print(build_bundle("control-plane", quiet=True))
        return 0
    if args.cmd == "setup":
        node_host.setup()
        return 0
    return {
        "images": cmd_images,
        "node-ns": cmd_node_ns,
        "kueue-exec": kueue.cmd_kueue_exec,
        "up": lifecycle.cmd_up,
        "down": lifecycle.cmd_down,
        "status": cmd_status,
        "logserver": cmd_logserver,
        "restart": lifecycle.cmd_restart,
        "watchdog": lifecycle.cmd_watchdog,
    }[args.cmd](args)
