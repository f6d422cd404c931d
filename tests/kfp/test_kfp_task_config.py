"""Task configuration from KFP copied onto the JobSet's pod templates (merge rules)."""

from __future__ import annotations

from typing import Any

import pytest
from kfp import dsl

from jobset_core.errors import SpecError
from jobset_core.models import load_jobset
from kfp_components._task_config import PodOverrides, apply_task_config, overrides_from
from tests.kfp.conftest import LEADER, WORKERS, make_jobset

pytestmark = pytest.mark.kfp


def _pod(jobset: Any, rjob: str) -> dict[str, Any]:
    spec: dict[str, Any] = jobset.replicated_job(rjob).template.spec["template"]["spec"]
    return spec


def _with_pod(rjob: str, **fields: Any) -> Any:
    document = make_jobset()
    for item in document["spec"]["replicatedJobs"]:
        if item["name"] == rjob:
            item["template"]["spec"]["template"]["spec"].update(fields)
    return load_jobset(document)


def test_reads_a_dsl_task_config() -> None:
    config = dsl.TaskConfig(
        resources={"limits": {"cpu": "2"}, "requests": {}},
        env=[{"name": "A", "value": "1"}],
        node_selector={"zone": "a"},
        tolerations=[{"key": "gpu", "operator": "Exists"}],
    )
    overrides = overrides_from(config)
    assert overrides.resources == {"limits": {"cpu": "2"}, "requests": {}}
    assert overrides.node_selector == {"zone": "a"}
    assert not overrides.empty


@pytest.mark.parametrize(
    "config",
    [
        pytest.param(None, id="none"),
        pytest.param(dsl.TaskConfig(), id="empty-task-config"),
        pytest.param(
            {"resources": {"limits": {}, "requests": {}}}, id="resources-without-quantities"
        ),
        pytest.param({"nodeSelector": {}, "env": []}, id="empty-json"),
    ],
)
def test_nothing_to_apply(config: Any) -> None:
    jobset = load_jobset(make_jobset())
    overrides = overrides_from(config)
    assert overrides.empty
    assert apply_task_config(jobset, overrides) is jobset


def test_struct_numbers_become_integers() -> None:
    toleration = {"key": "spot", "operator": "Exists", "tolerationSeconds": 300.0}
    overrides = overrides_from({"tolerations": [toleration]})
    assert overrides.tolerations[0]["tolerationSeconds"] == 300
    assert type(overrides.tolerations[0]["tolerationSeconds"]) is int


def test_reads_json_spelling() -> None:
    overrides = overrides_from({"nodeSelector": {"a": "b"}, "volumeMounts": [{"name": "v"}]})
    assert overrides == PodOverrides(node_selector={"a": "b"}, volume_mounts=[{"name": "v"}])


CASES = [
    pytest.param(
        {},
        PodOverrides(resources={"limits": {"nvidia.com/gpu": "1"}, "requests": {"cpu": "4"}}),
        lambda pod: pod["containers"][0]["resources"],
        {"limits": {"nvidia.com/gpu": "1"}, "requests": {"cpu": "4"}},
        id="resources-on-main-container",
    ),
    pytest.param(
        {
            "containers": [
                {
                    "name": "main",
                    "image": "i",
                    "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
                }
            ]
        },
        PodOverrides(resources={"limits": {"cpu": "8"}, "requests": {}}),
        lambda pod: pod["containers"][0]["resources"],
        {"limits": {"cpu": "8", "memory": "1Gi"}},
        id="resources-task-wins-key-by-key",
    ),
    pytest.param(
        {"containers": [{"name": "main", "image": "i"}, {"name": "side", "image": "s"}]},
        PodOverrides(resources={"limits": {"cpu": "8"}}),
        lambda pod: "resources" in pod["containers"][1],
        False,
        id="resources-not-on-sidecar",
    ),
    pytest.param(
        {"containers": [{"name": "main", "image": "i", "env": [{"name": "A", "value": "old"}]}]},
        PodOverrides(env=[{"name": "A", "value": "new"}, {"name": "B", "value": "b"}]),
        lambda pod: pod["containers"][0]["env"],
        [{"name": "A", "value": "new"}, {"name": "B", "value": "b"}],
        id="env-replaces-same-name",
    ),
    pytest.param(
        {"containers": [{"name": "main", "image": "i"}, {"name": "side", "image": "s"}]},
        PodOverrides(env=[{"name": "B", "value": "b"}]),
        lambda pod: [c.get("env") for c in pod["containers"]],
        [[{"name": "B", "value": "b"}], [{"name": "B", "value": "b"}]],
        id="env-on-every-container",
    ),
    pytest.param(
        {"nodeSelector": {"zone": "a", "pool": "p"}},
        PodOverrides(node_selector={"zone": "b"}),
        lambda pod: pod["nodeSelector"],
        {"zone": "b", "pool": "p"},
        id="node-selector-merged",
    ),
    pytest.param(
        {"tolerations": [{"key": "gpu", "operator": "Exists"}]},
        PodOverrides(
            tolerations=[
                {"key": "gpu", "operator": "Exists"},
                {"key": "spot", "operator": "Exists"},
            ]
        ),
        lambda pod: pod["tolerations"],
        [{"key": "gpu", "operator": "Exists"}, {"key": "spot", "operator": "Exists"}],
        id="tolerations-appended-once",
    ),
    pytest.param(
        {"affinity": {"nodeAffinity": {"old": 1}, "podAffinity": {"keep": 1}}},
        PodOverrides(affinity={"nodeAffinity": {"new": 1}}),
        lambda pod: pod["affinity"],
        {"nodeAffinity": {"new": 1}, "podAffinity": {"keep": 1}},
        id="affinity-by-kind",
    ),
    pytest.param(
        {"volumes": [{"name": "data", "emptyDir": {}}]},
        PodOverrides(
            volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "ws"}}],
            volume_mounts=[{"name": "data", "mountPath": "/data"}],
        ),
        lambda pod: (pod["volumes"], pod["containers"][0]["volumeMounts"]),
        (
            [{"name": "data", "persistentVolumeClaim": {"claimName": "ws"}}],
            [{"name": "data", "mountPath": "/data"}],
        ),
        id="volumes-replace-same-name",
    ),
]


@pytest.mark.parametrize(("pod_fields", "overrides", "read", "expected"), CASES)
def test_merge_rules(
    pod_fields: dict[str, Any], overrides: PodOverrides, read: Any, expected: Any
) -> None:
    jobset = _with_pod(LEADER, **pod_fields)
    updated = apply_task_config(jobset, overrides)
    assert read(_pod(updated, LEADER)) == expected


def test_every_replicated_job_by_default_and_input_untouched() -> None:
    jobset = load_jobset(make_jobset())
    before = jobset.to_dict()
    updated = apply_task_config(jobset, PodOverrides(node_selector={"zone": "a"}))
    assert [_pod(updated, name).get("nodeSelector") for name in (LEADER, WORKERS)] == [
        {"zone": "a"},
        {"zone": "a"},
    ]
    assert jobset.to_dict() == before


def test_only_named_replicated_jobs() -> None:
    jobset = load_jobset(make_jobset())
    updated = apply_task_config(jobset, PodOverrides(node_selector={"zone": "a"}), [WORKERS])
    assert "nodeSelector" not in _pod(updated, LEADER)
    assert _pod(updated, WORKERS)["nodeSelector"] == {"zone": "a"}


def test_unknown_replicated_job_is_an_error() -> None:
    jobset = load_jobset(make_jobset())
    with pytest.raises(SpecError, match="no replicated job 'trainer'"):
        apply_task_config(jobset, PodOverrides(), ["trainer"])
