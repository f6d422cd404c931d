"""Markers by folder: every test under ``tests/core/`` carries ``core``.

``scripts/test.sh`` runs the core's cluster tests on the KFP side only (``-m "core and
cluster"`` there, ``not (core and cluster)`` on the Airflow side): that side is locked at the
lowest ``kubernetes_asyncio`` the core accepts, and the Airflow side's adapter cluster tests
prove the newest through the same core. The core's pure tests run on both sides.
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
