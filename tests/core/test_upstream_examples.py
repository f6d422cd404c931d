"""The search for upstream example JobSets (``tests/core/conftest.py``), and what the examples
must satisfy beyond loading and rendering: validity under the controller's default gates.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobset_core.models import load_jobset
from jobset_core.validation import validate
from tests.core.conftest import (
    EXAMPLE_SOURCES,
    SEARCH_FAILED_ID,
    UpstreamExample,
    UpstreamExamples,
    example_params,
    find_upstream_examples,
    search_upstream_examples,
)

#: JobSet documents in each source: the module zips are immutable (checked against the Go
#: checksum database), so fewer means the search lost some.
MIN_EXAMPLES = {"v0.12.0": 1, "v0.8.2": 18}
RESTART_JOB_ACTIONS = ("RestartJob", "RestartJobAndIgnoreMaxRestarts")


def jobset(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": {"replicatedJobs": [], **spec},
    }


def write(root: Path, relpath: str, *documents: Any, raw: str | None = None) -> None:
    path = root / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(raw if raw is not None else yaml.safe_dump_all(documents))


# -- the search, on trees built here ----------------------------------------------------------


def test_search_keeps_top_level_jobsets_and_ids_show_version_and_path(tmp_path: Path) -> None:
    new, old = tmp_path / "new", tmp_path / "old"
    write(new, "config/samples/sample.yaml", jobset("sample"))
    write(old, "site/static/examples/simple/a.yaml", jobset("a"), jobset("b"))
    write(
        old,
        "site/static/examples/argo/workflow.yaml",
        {"kind": "ServiceAccount"},
        {"kind": "Workflow", "spec": {"manifest": jobset("embedded")}},
        jobset("after-others"),
    )
    write(old, "site/static/examples/simple/README.md", raw="kind: JobSet\n")
    found = find_upstream_examples(
        [("v2", new, ("config/samples",)), ("v1", old, ("site/static/examples",))]
    )
    assert [e.id for e in found.examples] == [
        "v2/config/samples/sample.yaml",
        "v1/argo/workflow.yaml#2",
        "v1/simple/a.yaml",
        "v1/simple/a.yaml#1",
    ]
    assert [e.document["metadata"]["name"] for e in found.examples] == [
        "sample",
        "after-others",
        "a",
        "b",
    ]
    assert found.examples[1].path == old / "site/static/examples/argo/workflow.yaml"
    assert found.root is None  # neither tree is the version we target
    assert found.roots == {"v2": new, "v1": old}
    assert found.searched == ("v2/config/samples", "v1/site/static/examples")
    assert (found.skipped, found.duplicates, found.errors) == ((), (), ())


def test_search_drops_documents_seen_in_a_newer_source(tmp_path: Path) -> None:
    new, old = tmp_path / "new", tmp_path / "old"
    same = jobset("same", suspend=True)
    reordered = dict(reversed(list(copy.deepcopy(same).items())))
    write(new, "config/samples/s.yaml", same)
    write(old, "config/samples/s.yaml", reordered, jobset("changed", suspend=False))
    write(old, "config/samples/t.yaml", same)
    found = find_upstream_examples(
        [("v2", new, ("config/samples",)), ("v1", old, ("config/samples",))]
    )
    assert [e.id for e in found.examples] == [
        "v2/config/samples/s.yaml",
        "v1/config/samples/s.yaml#1",
    ]
    assert found.duplicates == (
        "v1/config/samples/s.yaml: same as v2/config/samples/s.yaml",
        "v1/config/samples/t.yaml: same as v2/config/samples/s.yaml",
    )


def test_search_reports_what_it_could_not_use(tmp_path: Path) -> None:
    write(tmp_path, "config/samples/v1alpha1.yaml", {**jobset("x"), "apiVersion": "jobset/v1"})
    write(tmp_path, "config/samples/broken.yaml", raw="kind: JobSet\n  : [\n")
    found = find_upstream_examples([("v0.12.0", tmp_path, ("config/samples", "site/static"))])
    assert found.examples == ()
    assert found.root == tmp_path
    assert found.skipped == ("v0.12.0/config/samples/v1alpha1.yaml: apiVersion jobset/v1",)
    assert [e.split(":")[0] for e in found.errors] == [
        "v0.12.0/config/samples/broken.yaml",
        "v0.12.0",
    ]
    assert found.errors[1] == f"v0.12.0: no site/static in {tmp_path}"


@pytest.mark.parametrize(
    ("examples", "errors", "failing"),
    [
        pytest.param(1, (), False, id="found"),
        pytest.param(0, (), True, id="nothing-found"),
        pytest.param(1, ("v0.8.2: download failed",), True, id="found-some-with-errors"),
    ],
)
def test_a_failed_search_adds_a_failing_case(
    examples: int, errors: tuple[str, ...], failing: bool
) -> None:
    example = UpstreamExample("v1", "config/samples/a.yaml", 0, jobset("a"), Path("a.yaml"))
    search = UpstreamExamples(None, examples=(example,) * examples, errors=errors)
    ids = [p.id for p in example_params(search)]
    assert ids == ["v1/config/samples/a.yaml"] * examples + [SEARCH_FAILED_ID] * failing


# -- the search, on the downloaded modules ----------------------------------------------------


def test_every_source_gives_examples(upstream_examples: UpstreamExamples) -> None:
    assert upstream_examples.errors == ()
    if os.environ.get("JOBSET_UPSTREAM_DIR"):  # one checkout instead of the module versions
        assert upstream_examples.examples
        return
    assert set(upstream_examples.searched) == {
        f"{s.version}/{d}" for s in EXAMPLE_SOURCES for d in s.dirs
    }
    counts = {s.version: 0 for s in EXAMPLE_SOURCES}
    for example in upstream_examples.examples:
        counts[example.version] += 1
    assert all(counts[v] >= n for v, n in MIN_EXAMPLES.items()), counts
    ids = [e.id for e in upstream_examples.examples]
    assert len(ids) == len(set(ids))


# -- validity under the controller's default feature gates ------------------------------------


def gated_problems(document: dict[str, Any]) -> list[tuple[str, str]]:
    """``(path, rule)`` of what the webhook rejects in ``document`` only because an alpha
    feature gate (InPlaceRestart, RestartJob) is off by default."""
    policy = (document.get("spec") or {}).get("failurePolicy") or {}
    out = [
        (f"spec.failurePolicy.rules[{i}].action", "restart-job-gate")
        for i, rule in enumerate(policy.get("rules") or [])
        if rule.get("action") in RESTART_JOB_ACTIONS
    ]
    if policy.get("restartStrategy") == "InPlaceRestart":
        out.append(("spec.failurePolicy.restartStrategy", "in-place-restart-gate"))
    return sorted(out)


def _problems_without_gates(document: dict[str, Any]) -> list[tuple[str, str]]:
    problems = validate(load_jobset(document))
    # Job fields newer than the installed kubernetes client are carried, not judged here.
    return [
        (p.path, p.rule)
        for p in problems
        if not (p.rule == "unknown-field" and "may be newer" in p.message)
    ]


def test_example_is_valid_unless_gated(upstream_example: UpstreamExample) -> None:
    document = upstream_example.document
    assert _problems_without_gates(document) == gated_problems(document)


def _gated_variants(search: UpstreamExamples) -> list[Any]:
    """Upstream examples with a failure policy, changed to use a gated feature."""
    variants = []
    for example in search.examples:
        policy = (example.document.get("spec") or {}).get("failurePolicy")
        if not policy:
            continue
        in_place = copy.deepcopy(example.document)
        in_place["spec"]["failurePolicy"]["restartStrategy"] = "InPlaceRestart"
        variants.append(pytest.param(in_place, id=f"{example.id}+InPlaceRestart"))
        if policy.get("rules"):
            restart_job = copy.deepcopy(example.document)
            for rule in restart_job["spec"]["failurePolicy"]["rules"]:
                rule["action"] = "RestartJob"
            variants.append(pytest.param(restart_job, id=f"{example.id}+RestartJob"))
    return variants


def test_gated_variants_exist(upstream_examples: UpstreamExamples) -> None:
    ids = [p.id for p in _gated_variants(upstream_examples)]
    assert any(i.endswith("+RestartJob") for i in ids), ids


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "gated_variant" in metafunc.fixturenames:
        metafunc.parametrize("gated_variant", _gated_variants(search_upstream_examples()))


def test_gated_variant_is_rejected_only_for_its_gate(gated_variant: dict[str, Any]) -> None:
    expected = gated_problems(gated_variant)
    assert expected
    assert _problems_without_gates(gated_variant) == expected


def _server_rejects(devcluster: Any, namespace: str, document: dict[str, Any]) -> str | None:
    """Why the devcluster's webhook and CRD (alpha gates off) reject ``document`` on a
    server-side dry run, or None when they accept it."""
    from kubernetes.client.exceptions import ApiException

    body = copy.deepcopy(document)
    body["metadata"] = {**body["metadata"], "namespace": namespace}
    try:
        devcluster.create_jobset(namespace, body, dry_run=True)
    except ApiException as err:
        assert err.status in (400, 422), err
        return str(err.body)
    return None


@pytest.mark.cluster
def test_server_accepts_example_unless_gated(
    upstream_example: UpstreamExample, devcluster: Any, cluster_namespace: str
) -> None:
    document = upstream_example.document
    reason = _server_rejects(devcluster, cluster_namespace, document)
    assert (reason is not None) == bool(gated_problems(document)), reason


@pytest.mark.cluster
def test_server_rejects_gated_variant(
    gated_variant: dict[str, Any], devcluster: Any, cluster_namespace: str
) -> None:
    reason = _server_rejects(devcluster, cluster_namespace, gated_variant)
    assert reason is not None
    assert "feature gate is disabled" in reason, reason
