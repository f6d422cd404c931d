"""Markers by folder: every test under ``tests/core/`` carries ``core``.

``scripts/test.sh`` selects the KFP side's tests with it (``-m "kfp or core or not cluster"``):
the core's cluster tests run there, at the lowest ``kubernetes_asyncio`` the core accepts, as
well as on the Airflow side, at the newest. The core's pure tests run on both sides.
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
