"""Markers by folder: every test under ``tests/core/`` carries ``core``; by fixture: every
test that uses the ``devcluster`` fixture (itself or through another fixture) carries
``cluster``, so a selection of the tests that need no cluster (``-m "not cluster"``, as
tests/release/test_ranges.py runs the core at both ends of its ranges) never starts one.

``scripts/test.sh`` runs the core's cluster tests on both sides: the KFP side is locked at the
lowest ``kubernetes_asyncio`` the core accepts, the Airflow side at the newest, so both ends of
the range meet the devcluster (its pure tests run at both ends in tests/release/test_ranges.py).
The marker selects the core alone (``-m core``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parent / "core"


@pytest.hookimpl(tryfirst=True)  # before -m selects by markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(CORE):
            item.add_marker(pytest.mark.core)
        if "devcluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.cluster)


@pytest.fixture
def unwritable_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``$XDG_CACHE_HOME`` pointing at a file: the core's file cache can neither be read nor
    written (a read-only home)."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    return blocker
