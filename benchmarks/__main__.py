"""``python -m benchmarks run|report``: measure, or turn a results file into the docs page
and the charts (see :mod:`benchmarks`)."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.cluster import MIN_REQUEST_TIMEOUT, ROOT, BenchCluster, progress
from benchmarks.context import Context
from benchmarks.proc import Sampler
from benchmarks.profiles import FAMILIES, PROFILES
from benchmarks.results import Results, describe_machine, machine_load

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "latest.json"
DEFAULT_STATE = ROOT / ".devcluster-bench"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="measure every family (or --only some)")
    run.add_argument("--profile", choices=sorted(PROFILES), default="full")
    run.add_argument("--only", default=",".join(FAMILIES), help="families, comma-separated")
    run.add_argument("--out", type=Path, default=DEFAULT_OUT)
    run.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override a field of the profile (e.g. tasks=200, layouts=1,10)",
    )
    run.add_argument(
        "--state-dir",
        type=Path,
        default=DEFAULT_STATE,
        help="the bench devcluster's state folder (unless KUBECONFIG names a cluster)",
    )
    run.add_argument("--keep-work", action="store_true", help="keep the subjects' logs")
    run.add_argument(
        "--keep-cluster",
        action="store_true",
        help="leave the bench devcluster running (the next run reuses it)",
    )
    report = sub.add_parser("report", help="results JSON -> docs page, charts, table")
    report.add_argument("results", type=Path, nargs="?", default=DEFAULT_OUT)
    report.add_argument("--page", type=Path, help="write the docs page here")
    report.add_argument("--charts", type=Path, help="write the PNG charts into this folder")
    return parser


def _measure(args: argparse.Namespace) -> int:
    profile = PROFILES[args.profile].with_overrides(args.set)
    families = [f for f in args.only.split(",") if f]
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown:
        print(
            f"unknown families: {', '.join(unknown)} (known: {', '.join(FAMILIES)})",
            file=sys.stderr,
        )
        return 2
    results = Results(profile=profile.name, settings=dataclasses.asdict(profile))
    results.machine = {**describe_machine(), "before": machine_load()}
    work = Path(tempfile.mkdtemp(prefix="jobset-bench-"))
    kubeconfig = os.environ.get("KUBECONFIG")
    started = time.monotonic()
    # SIGTERM (make interrupted, a CI timeout) unwinds like Ctrl-C: subjects and cluster stop.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    if kubeconfig:
        progress(
            f"on the cluster of KUBECONFIG={kubeconfig} "
            "(no audit log: requests counted client-side)"
        )
        cluster = BenchCluster.existing(Path(kubeconfig), work)
        results.notes.append("cluster: KUBECONFIG (requests counted in each subject's process)")
    else:
        cluster = BenchCluster.start(args.state_dir, work, keep=args.keep_cluster)
        results.settings["server_min_request_timeout"] = MIN_REQUEST_TIMEOUT
        results.notes.append("cluster: the bench devcluster (requests counted at the API server)")
    ctx = Context(cluster, profile, Sampler(port=cluster.port))
    ctx.sampler.start()
    status = 0
    try:
        for family in families:
            family_started = time.monotonic()
            progress(f"== {family} ({profile.name} profile)")
            module = importlib.import_module(f"benchmarks.{family}")
            try:
                figures = module.run(ctx)
            except Exception as error:  # the other families still run; the run fails
                progress(f"FAILED {family}: {error!r}")
                results.notes.append(f"{family}: failed: {error!r}")
                status = 1
                continue
            results.add(figures)
            progress(
                f"== {family}: {len(figures)} figures in {time.monotonic() - family_started:.0f}s"
            )
            results.machine["after"] = machine_load()
            results.write(args.out)
    finally:
        ctx.close()
        cluster.close(keep=args.keep_cluster)
        if args.keep_work:
            progress(f"subjects' logs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    results.machine["after"] = machine_load()
    results.machine["seconds"] = round(time.monotonic() - started, 1)
    results.write(args.out)
    from benchmarks.report import table

    print(table(results))
    progress(
        f"wrote {args.out} ({len(results.figures)} figures) in {time.monotonic() - started:.0f}s"
    )
    return status


def _report(args: argparse.Namespace) -> int:
    from benchmarks.report import page, table

    results = Results.read(args.results)
    if args.page:
        args.page.write_text(page(results), encoding="utf-8")
        print(f"wrote {args.page}")
    if args.charts:
        from benchmarks.charts import draw

        for path in draw(results, args.charts):
            print(f"wrote {path}")
    if not args.page and not args.charts:
        print(table(results))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command != "run":
        return _report(args)
    try:
        return _measure(args)
    except KeyboardInterrupt:
        progress("interrupted: subjects and the bench devcluster stopped")
        return 130


if __name__ == "__main__":
    sys.exit(main())
