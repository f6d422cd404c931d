"""``make bench``'s smoke profile: every family, tiny sizes, no thresholds.

It runs the suite as ``make bench`` does (its own devcluster, with the audit log), so the
benchmark code never rots, and checks what the suite promises whatever the numbers: every
family yields figures, each with ours and its anchor measured in the same run, the docs page
renders from the JSON, and nothing is left behind (no subject process, no cluster).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from benchmarks.goals import GOALS, judge
from benchmarks.profiles import FAMILIES
from benchmarks.report import page
from benchmarks.results import Results

ROOT = Path(__file__).resolve().parents[2]

# Not ``alone``: the smoke asserts no figure (its cluster is its own), so it runs beside the
# other cluster tests instead of adding its minutes to the quiet pass.
pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]


def _ours(state: Path) -> list[psutil.Process]:
    """Processes still running from this run: the bench cluster's (their command line names
    its state folder) and the subjects (``python -m benchmarks.<subject>``)."""
    found = []
    for process in psutil.process_iter(["cmdline", "environ"]):
        try:
            line = " ".join(process.info["cmdline"] or [])
            env = process.info["environ"] or {}
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if str(state) in line or env.get("DEVCLUSTER_STATE_DIR") == str(state):
            found.append(process)
    return found


def test_smoke_profile_runs_every_family_and_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "smoke.json"
    state = tmp_path / "bench-cluster"
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    started = time.monotonic()
    done = subprocess.run(
        [
            *(sys.executable, "-m", "benchmarks", "run", "--profile", "smoke"),
            *("--out", str(out), "--state-dir", str(state)),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        # ~330 s on a quiet machine with the view family (a real Airflow and Chromium); a
        # cold run's loaded first pass took it past the 400 s this was. Below the test's own
        # timeout, so its output is shown.
        timeout=780,
        check=False,
    )
    took = time.monotonic() - started
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "[bench" in done.stdout  # progress lines
    print(f"smoke profile: {took:.0f}s")

    results = Results.read(out)
    assert results.profile == "smoke"
    assert "before" in results.machine and "after" in results.machine
    assert {f.family for f in results.figures} == set(FAMILIES)
    for figure in results.figures:
        assert figure.ours is not None, figure
        assert figure.anchor is not None, figure  # measured in the same run, never missing
    raw = json.loads(out.read_text())
    assert set(raw["figures"][0]) == {
        "figure",
        "unit",
        "ours",
        "anchor",
        "ratio",
        "floor",
        "n",
        "params",
    }
    # Every goal bounds figures the suite really makes (the smoke layout is too sparse for
    # the one about crowded namespaces, its view too small for the one about 1,000 pods).
    judged = {j.goal.name for j in judge(results.figures)}
    sized = ("tasks per namespace", "1,000-pod")
    assert judged == {g.name for g in GOALS if not any(s in g.name for s in sized)}
    text = page(results)
    assert "## Goals" in text and "Scale in one triggerer" in text

    assert _ours(state) == []
    status = subprocess.run(
        [sys.executable, str(ROOT / "tests/cluster/devcluster.py"), "status"],
        env={**env, "DEVCLUSTER_STATE_DIR": str(state)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert status.returncode != 0, status.stdout  # stopped
