"""What a task keeps in Airflow's task state store between its tries, and what the next try
makes of it (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_jobset._state import Earlier, earlier, record
from jobset_core.lifecycle import Handle, Verdict

RUN = Handle("train-1a2b", "jobs", "uid-1", "controller")
DONE = Verdict(kind="completed", name=RUN.name, namespace="jobs", uid="uid-1", backend="controller")


@pytest.mark.parametrize(
    ("kept", "name", "expected"),
    [
        pytest.param(None, RUN.name, Earlier(), id="nothing-kept"),
        pytest.param(record(RUN), "other-run", Earlier(), id="another-run"),
        pytest.param(record(RUN), RUN.name, Earlier(adopt_uid="uid-1"), id="no-verdict-yet"),
        pytest.param(
            record(RUN, finished=True, verdict=DONE),
            RUN.name,
            Earlier(verdict=DONE, handle=RUN),
            id="killed-after-its-verdict",
        ),
        pytest.param(
            record(RUN, finished=True, concluded=True),
            RUN.name,
            Earlier(stale=RUN),
            id="concluded",
        ),
        pytest.param(
            {**record(RUN), "finished": True},  # an older record: no verdict kept
            RUN.name,
            Earlier(adopt_uid="uid-1"),
            id="finished-without-a-verdict",
        ),
    ],
)
def test_what_the_next_try_makes_of_the_record(kept: Any, name: str, expected: Earlier) -> None:
    assert earlier(kept, name) == expected


def test_a_record_is_plain_data() -> None:
    import json

    kept = record(RUN, finished=True, verdict=DONE)
    assert earlier(json.loads(json.dumps(kept)), RUN.name) == Earlier(verdict=DONE, handle=RUN)
