"""The benchmark tests run where their tools are: the smoke profile in the Airflow
environment (the subjects are Airflow's triggers), the charts in the docs environment (it has
matplotlib); the pure tests in both. Elsewhere those modules are not collected."""

from __future__ import annotations

import importlib.util

collect_ignore = []
if importlib.util.find_spec("matplotlib") is None:
    collect_ignore.append("test_bench_charts.py")
if importlib.util.find_spec("airflow") is None:
    collect_ignore.append("test_bench_smoke.py")
