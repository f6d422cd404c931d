"""Every Airflow minor the package claims has an environment that the suite runs, and the
tested matrix page says so (both are read from the lock files, so a claim without a lock, or
a lock without the claim, fails here)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.docs._docs_gen import docs_gen

ROOT = Path(__file__).resolve().parents[2]


def test_every_claimed_airflow_minor_has_a_locked_environment() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    low, high = re.search(r'"apache-airflow>=(\d+\.\d+)(?:\.\d+)?,<(\d+)"', pyproject).groups()  # type: ignore[union-attr]
    gen = docs_gen()
    locked = {}
    for lock in gen.matrix_locks(ROOT):
        version = gen.locked_versions(lock.read_text()).get("apache-airflow")
        if version:
            locked[lock.stem] = version
    newest = locked.pop("airflow")
    major, first = (int(x) for x in low.split("."))
    last = int(newest.split(".")[1])
    assert int(high) == major + 1
    claimed = {f"{major}.{m}" for m in range(first, last)}
    assert {side.removeprefix("airflow-") for side in locked} == claimed
    for side, version in locked.items():
        assert version.startswith(side.removeprefix("airflow-") + "."), (side, version)


def test_the_matrix_script_runs_every_lock() -> None:
    script = (ROOT / "scripts/matrix.sh").read_text()
    assert "locks=(requirements/airflow-3.*.txt)" in script
    assert "scripts/matrix.sh" in (ROOT / "scripts/test.sh").read_text()


def test_the_matrix_page_lists_every_environment() -> None:
    gen = docs_gen()
    page = gen.matrix_page(ROOT)
    for lock in gen.matrix_locks(ROOT):
        assert f"| `{lock.stem}` |" in page
    assert [t for t, cluster in gen.matrix_tests(ROOT) if cluster], "no cluster subset marked"
