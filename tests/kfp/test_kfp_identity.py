"""The task identity: placeholders must be resolved; names derive from run and task."""

from __future__ import annotations

import pytest

from jobset_core.errors import SpecError
from jobset_core.models import load_jobset
from kfp_components._identity import (
    RUN_ID_KEY,
    derived_name,
    kfp_identity,
    name_as_prefix,
    run_selector,
    unresolved,
)
from tests.kfp.conftest import make_jobset

pytestmark = pytest.mark.kfp


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("", True, id="empty"),
        pytest.param("   ", True, id="blank"),
        pytest.param("{{$.pipeline_job_uuid}}", True, id="run-placeholder"),
        pytest.param("{{$.pipeline_task_uuid}}", True, id="task-placeholder"),
        pytest.param("run-{{$.pipeline_job_uuid}}", True, id="embedded-placeholder"),
        pytest.param("6f1c2a9e-1b2c-4d5e-8f90-0a1b2c3d4e5f", False, id="uuid"),
        pytest.param("12345", False, id="dag-execution-id"),
        pytest.param("launch-jobset", False, id="task-name"),
    ],
)
def test_unresolved(value: str, expected: bool) -> None:
    assert unresolved(value) is expected


def test_identity_of_resolved_values() -> None:
    assert kfp_identity("r1", "train", "7") == {
        "kfp-run-id": "r1",
        "kfp-task-name": "train",
        "kfp-task-id": "7",
    }


def test_identity_lists_every_unresolved_value() -> None:
    with pytest.raises(SpecError) as caught:
        kfp_identity("{{$.pipeline_job_uuid}}", "train", "")
    paths = [p.path for p in caught.value.problems]
    assert paths == ["run_id", "task_id"]
    assert "dsl.PIPELINE_JOB_ID_PLACEHOLDER" in str(caught.value)


def test_name_becomes_prefix() -> None:
    jobset = name_as_prefix(load_jobset(make_jobset("train")))
    assert jobset.metadata.name is None
    assert jobset.metadata.generate_name == "train-"


def test_without_name_nothing_changes() -> None:
    document = make_jobset()
    document["metadata"] = {"generateName": "fit-"}
    jobset = load_jobset(document)
    assert name_as_prefix(jobset) is jobset


@pytest.mark.parametrize(
    ("other", "same"),
    [
        pytest.param(("r1", "train", "7"), True, id="retry-same-identity"),
        pytest.param(("r2", "train", "7"), False, id="next-run"),
        pytest.param(("r1", "train-2", "7"), False, id="second-task-in-dag"),
        pytest.param(("r1", "train", "8"), False, id="parallelfor-iteration"),
    ],
)
def test_derived_name_is_deterministic(other: tuple[str, str, str], same: bool) -> None:
    jobset = load_jobset(make_jobset("train"))
    first = derived_name(jobset, kfp_identity("r1", "train", "7"))
    second = derived_name(jobset, kfp_identity(*other))
    assert first.startswith("train-")
    assert (first == second) is same


def test_run_selector_matches_the_identity_labels() -> None:
    from jobset_core.identity import identity_labels

    labels = identity_labels(kfp_identity("manual:run+1", "t", "1"))
    selector = run_selector("manual:run+1")
    assert selector.items() <= labels.items()
    assert list(selector) == ["jobset-core/" + RUN_ID_KEY]


@pytest.mark.parametrize(
    ("run_id", "ok"),
    [
        pytest.param("r1", True, id="resolved"),
        pytest.param("{{$.pipeline_job_uuid}}", False, id="placeholder"),
        pytest.param("", False, id="empty"),
    ],
)
def test_checked_run_id(run_id: str, ok: bool) -> None:
    from kfp_components._identity import checked_run_id

    if ok:
        assert checked_run_id(run_id) == run_id
    else:
        with pytest.raises(SpecError, match="run_id"):
            checked_run_id(run_id)
