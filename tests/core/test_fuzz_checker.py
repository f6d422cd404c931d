"""The differential fuzz test's own parts, without a cluster: mutations replay exactly, and the
comparison flags every kind of disagreement (so the fuzz test can fail)."""

from __future__ import annotations

from typing import Any

import pytest

from jobset_core.errors import Problem
from tests.core.fuzz import Mutant, Mutation, Verdict, disagreements, paths

SERVER_OK = Verdict(True)
SERVER_NO = Verdict(False, rejection="422 Invalid: ...", step="Job js-w-0")


@pytest.mark.parametrize(
    ("ours", "theirs", "expected"),
    [
        pytest.param(Verdict(True), SERVER_OK, [], id="both-accept"),
        pytest.param(
            Verdict(False, [Problem("spec.x", "bad", "type")]), SERVER_NO, [], id="both-reject"
        ),
        pytest.param(
            Verdict(True), SERVER_NO, ["we accept what the server rejects at Job js-w-0"], id="lax"
        ),
        pytest.param(
            Verdict(False, [Problem("spec.x", "bad", "type")]),
            SERVER_OK,
            ["we reject what the server accepts: spec.x: bad [type]"],
            id="strict",
        ),
        pytest.param(
            Verdict(
                False, [Problem("spec.replicatedJobs[0].replicas", "<0", "greater_than_equal")]
            ),
            SERVER_OK,
            [],
            id="deliberately-strict",
        ),
        pytest.param(
            Verdict(False, [Problem("spec.suspend", "<0", "greater_than_equal")]),
            SERVER_OK,
            ["we reject what the server accepts"],
            id="rule-of-the-table-at-another-path",
        ),
        pytest.param(
            Verdict(False, [Problem("", "somewhere", "job-selector")]),
            SERVER_NO,
            ["no field path"],
            id="no-path",
        ),
        pytest.param(
            Verdict(False, [Problem("", "not UTF-8 text (byte 3)", "not-utf8")]),
            SERVER_NO,
            [],
            id="whole-file-problem",
        ),
    ],
)
def test_disagreements(ours: Verdict, theirs: Verdict, expected: list[str]) -> None:
    found = disagreements(ours, theirs)
    assert len(found) == len(expected)
    for line, fragment in zip(found, expected, strict=True):
        assert fragment in line


def test_mutations_replay_on_their_seed() -> None:
    mutant = Mutant(
        "builder/leader-workers",
        (
            Mutation("set", ("metadata", "labels"), {"a": None}),
            Mutation("delete", ("spec", "replicatedJobs", 0, "name")),
            Mutation("append", ("spec", "replicatedJobs"), None),
            Mutation("nest", ("spec", "x"), (3, "list")),
            Mutation("set", ("no", "such", "path"), 1),
        ),
    )
    document: Any = mutant.document()
    assert document["metadata"]["labels"] == {"a": None}
    assert "name" not in document["spec"]["replicatedJobs"][0]
    assert document["spec"]["replicatedJobs"][-1] is None
    assert document["spec"]["x"] == [[["x"]]]
    assert "no" not in document
    assert mutant.document() == document  # a replay is the same document


def test_paths_walk_without_recursion_and_stop_at_a_depth() -> None:
    node: Any = "x"
    for _ in range(5000):
        node = [node]
    walked = list(paths({"a": node}, max_depth=10))
    assert max(len(path) for path, _ in walked) == 10
