"""How a wait ends (pure): the one delete policy every way in uses, and the core's error for
each verdict."""

from __future__ import annotations

import pytest

from jobset_core.errors import (
    CreationFailed,
    JobSetFailed,
    JobSetGone,
    JobSetRestarting,
    RunEnded,
    WaitTimeout,
)
from jobset_core.lifecycle import DELETE_POLICIES, Verdict, error_for, should_delete

KINDS = ("completed", "failed", "restarting", "reached", "timeout", "creation_failed", "gone")


def verdict(kind: str) -> Verdict:
    return Verdict(kind=kind, name="js", namespace="ns", backend="controller", message=f"{kind}!")  # type: ignore[arg-type]


# Which verdicts each policy deletes. A restart never deletes (the next try continues with the
# same JobSet), a sensor's "reached" and a "gone" run have nothing to delete.
DELETES = {
    "never": set(),
    "on_timeout": {"timeout", "creation_failed"},
    "on_success": {"timeout", "creation_failed", "completed"},
    "always": {"timeout", "creation_failed", "completed", "failed"},
}


@pytest.mark.parametrize("policy", DELETE_POLICIES)
@pytest.mark.parametrize("kind", KINDS)
def test_should_delete(policy: str, kind: str) -> None:
    assert should_delete(policy, verdict(kind)) is (kind in DELETES[policy])  # type: ignore[arg-type]


def test_delete_policies_are_the_table() -> None:
    assert set(DELETE_POLICIES) == set(DELETES)
    with pytest.raises(ValueError, match="unknown delete policy"):
        should_delete("sometimes", verdict("completed"))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kind", "error"),
    [
        ("completed", None),
        ("reached", None),
        ("failed", JobSetFailed),
        ("restarting", JobSetRestarting),
        ("timeout", WaitTimeout),
        ("creation_failed", CreationFailed),
        ("gone", JobSetGone),
    ],
)
def test_error_for(kind: str, error: type[RunEnded] | None) -> None:
    found = error_for(verdict(kind))
    assert (type(found) if found is not None else None) is error
    assert verdict(kind).ok is (error is None)
    if found is not None:
        assert found.verdict == verdict(kind) and str(found) == f"{kind}!"
        assert (found.namespace, found.name) == ("ns", "js")
