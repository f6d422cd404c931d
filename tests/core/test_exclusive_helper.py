"""The exclusive-placement check of the cluster tests (``tests/core/_exclusive.py``), on pods
made here: it must catch two Jobs live in one zone at once, and accept one that follows
another into a zone it left."""

from __future__ import annotations

from datetime import datetime, timedelta
from types import SimpleNamespace as NS
from typing import Any

import pytest

from tests.core._exclusive import exclusivity_problems

T0 = datetime(2026, 12, 2, 12, 0, 0)
ZONES = {"n1": "zone-a", "n2": "zone-a", "n3": "zone-b"}


def pod(job: str, node: str, start: int, end: int) -> Any:
    return NS(
        job=job,
        spec=NS(node_name=node),
        status=NS(
            conditions=[
                NS(
                    type="PodScheduled",
                    status="True",
                    last_transition_time=T0 + timedelta(seconds=start),
                )
            ],
            container_statuses=[
                NS(state=NS(terminated=NS(finished_at=T0 + timedelta(seconds=end))))
            ],
        ),
    )


@pytest.mark.parametrize(
    ("pods", "broken"),
    [
        ([pod("a", "n1", 0, 10), pod("a", "n2", 1, 10), pod("b", "n3", 0, 10)], []),
        ([pod("a", "n1", 0, 10), pod("b", "n2", 5, 12)], ["at the same time"]),
        ([pod("a", "n1", 0, 10), pod("b", "n2", 10, 20)], []),  # b followed a into zone-a
        ([pod("a", "n1", 0, 10), pod("a", "n3", 0, 10)], ["spans zones"]),
    ],
    ids=["distinct-zones", "overlap-in-one-zone", "one-after-the-other", "job-across-zones"],
)
def test_the_check_catches_what_exclusivity_forbids(pods: list[Any], broken: list[str]) -> None:
    found = exclusivity_problems(pods, ZONES, lambda p: p.job)
    assert len(found) == len(broken), found
    assert all(w in f for w, f in zip(broken, found, strict=True)), found
