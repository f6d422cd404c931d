"""Models of jobset.x-k8s.io/v1alpha2: loading, dumping, strictness, upstream examples, CRD."""

from __future__ import annotations

import copy
import datetime as dt
import json
from pathlib import Path
from typing import Any, get_args, get_origin

import pytest
import yaml
from pydantic import BaseModel

from jobset_core.errors import SpecError
from jobset_core.models import (
    EmbeddedObjectMeta,
    JobSet,
    dump_yaml,
    load_jobset,
    load_jobsets,
    unknown_fields,
)
from jobset_core.models._base import to_plain

UNKNOWN = "unknown-field"


def api_server_form(value: Any) -> Any:
    """``value`` as the API server stores it: ``null`` fields pruned, everything else as is."""
    if isinstance(value, dict):
        return {k: api_server_form(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [api_server_form(v) for v in value]
    return value


def minimal(name: str = "demo", **spec: Any) -> dict[str, Any]:
    """A small valid JobSet document (one replicated job of one busybox container)."""
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": 2,
                    "template": {
                        "spec": {
                            "parallelism": 2,
                            "completions": 2,
                            "template": {
                                "spec": {
                                    "restartPolicy": "Never",
                                    "containers": [{"name": "main", "image": "busybox"}],
                                }
                            },
                        }
                    },
                }
            ],
            **spec,
        },
    }


#: Every spec and status field of v1alpha2 (v0.12.0), in API spelling, with non-default values.
EVERYTHING: dict[str, Any] = {
    "apiVersion": "jobset.x-k8s.io/v1alpha2",
    "kind": "JobSet",
    "metadata": {
        "name": "everything",
        "namespace": "ml",
        "uid": "0b1c2d3e-0000-4000-8000-000000000001",
        "resourceVersion": "42",
        "generation": 3,
        "creationTimestamp": "2026-01-02T03:04:05Z",
        "labels": {"team": "ml", "kueue.x-k8s.io/queue-name": "q"},
        "annotations": {"alpha.jobset.sigs.k8s.io/exclusive-topology": "rack"},
        "finalizers": ["example.com/keep"],
        "ownerReferences": [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "name": "owner",
                "uid": "u-1",
                "controller": False,
                "blockOwnerDeletion": True,
            }
        ],
        "managedFields": [{"manager": "kubectl", "operation": "Update", "apiVersion": "v1"}],
    },
    "spec": {
        "replicatedJobs": [
            {
                "name": "driver",
                "groupName": "control",
                "replicas": 1,
                "template": {
                    "metadata": {
                        "name": "ignored",
                        "namespace": "ml",
                        "labels": {"role": "driver"},
                        "annotations": {"a": "b"},
                        "finalizers": ["x/y"],
                    },
                    "spec": {
                        "completionMode": "Indexed",
                        "completions": 1,
                        "parallelism": 1,
                        "podFailurePolicy": {
                            "rules": [
                                {
                                    "action": "FailJob",
                                    "onPodConditions": [{"type": "DisruptionTarget"}],
                                }
                            ]
                        },
                        "template": {
                            "spec": {
                                "containers": [
                                    {
                                        "name": "c",
                                        "image": "busybox",
                                        "ports": [{"containerPort": 3389, "protocol": "TCP"}],
                                        "resources": {"limits": {"nvidia.com/gpu": 8}},
                                    }
                                ]
                            }
                        },
                    },
                },
            },
            {
                "name": "workers",
                "replicas": 4,
                "dependsOn": [{"name": "driver", "status": "Ready"}],
                "template": {"spec": {"template": {"spec": {"containers": []}}}},
            },
        ],
        "network": {
            "enableDNSHostnames": True,
            "subdomain": "net",
            "publishNotReadyAddresses": False,
        },
        "successPolicy": {"operator": "Any", "targetReplicatedJobs": ["workers"]},
        "failurePolicy": {
            "maxRestarts": 3,
            "restartStrategy": "BlockingRecreate",
            "rules": [
                {
                    "name": "fatal",
                    "action": "FailJobSet",
                    "onJobFailureReasons": ["PodFailurePolicy", "DeadlineExceeded"],
                    "onJobFailureMessagePatterns": ["^OOM.*"],
                    "targetReplicatedJobs": ["driver"],
                },
                {"name": "rest", "action": "RestartJobSetAndIgnoreMaxRestarts"},
            ],
        },
        "startupPolicy": {"startupPolicyOrder": "AnyOrder"},
        "suspend": False,
        "coordinator": {"replicatedJob": "driver", "jobIndex": 0, "podIndex": 0},
        "managedBy": "example.com/other-controller",
        "ttlSecondsAfterFinished": 0,
        "volumeClaimPolicies": [
            {
                "templates": [
                    {
                        "metadata": {"name": "ckpt"},
                        "spec": {
                            "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1Gi"}},
                        },
                    }
                ],
                "retentionPolicy": {"whenDeleted": "Retain"},
            }
        ],
    },
    "status": {
        "conditions": [
            {
                "type": "Completed",
                "status": "True",
                "reason": "AllJobsCompleted",
                "message": "jobset completed successfully",
                "lastTransitionTime": "2026-01-02T03:14:05Z",
                "observedGeneration": 3,
            }
        ],
        "restarts": 2,
        "restartsCountTowardsMax": 1,
        "terminalState": "Completed",
        "replicatedJobsStatus": [
            {
                "name": "workers",
                "ready": 0,
                "succeeded": 4,
                "failed": 0,
                "active": 0,
                "suspended": 0,
                "jobRestarts": [0, 1, 0, 0],
                "jobRestartsCountTowardsMax": [0, 1, 0, 0],
            }
        ],
        "previousInPlaceRestartAttempt": 1,
        "currentInPlaceRestartAttempt": 2,
    },
}


# --------------------------------------------------------------------------------------------
# Upstream examples


def test_upstream_examples_found(upstream_examples: Any) -> None:
    assert upstream_examples.root is not None, upstream_examples.errors
    assert not upstream_examples.errors
    assert upstream_examples.examples, f"no JobSet found under {upstream_examples.searched}"
    for example in upstream_examples.examples:
        assert example.document["kind"] == "JobSet"


def test_upstream_example_round_trips(upstream_example: Any) -> None:
    original = copy.deepcopy(upstream_example.document)
    jobset = load_jobset(upstream_example.document)
    assert jobset.to_dict() == api_server_form(original)
    assert upstream_example.document == original, "loading must not change its input"
    again = load_jobset(dump_yaml(jobset))
    assert again == jobset
    assert again.to_dict() == jobset.to_dict()


def test_upstream_example_files_load_by_path(upstream_examples: Any) -> None:
    paths = sorted({example.path for example in upstream_examples.examples})
    assert paths, upstream_examples.errors
    for path in paths:
        documents = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        if all(isinstance(d, dict) and d.get("kind") == "JobSet" for d in documents):
            loaded = load_jobsets(path)
            assert [j.to_dict() for j in loaded] == [api_server_form(d) for d in documents]


# --------------------------------------------------------------------------------------------
# Field coverage against the upstream CRD


@pytest.fixture(scope="module")
def crd_schema(upstream_examples: Any) -> dict[str, Any]:
    assert upstream_examples.root is not None, upstream_examples.errors
    path = upstream_examples.root / "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml"
    crd = yaml.safe_load(path.read_text())
    (version,) = crd["spec"]["versions"]
    assert version["name"] == "v1alpha2"
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def _model_of(annotation: Any) -> tuple[type[BaseModel] | None, tuple[str, ...]]:
    """The model class and the Literal values inside an annotation (through lists/Optional)."""
    # get_origin: on Python 3.10 list[M] passes isinstance(type) but is no class.
    if isinstance(annotation, type) and get_origin(annotation) is None:
        return (annotation, ()) if issubclass(annotation, BaseModel) else (None, ())
    if str(get_origin(annotation)) == "typing.Literal":
        return None, tuple(get_args(annotation))
    for arg in get_args(annotation):
        found = _model_of(arg)
        if found != (None, ()):
            return found
    return None, ()


def _compare(model: type[BaseModel], schema: dict[str, Any], path: str, out: list[str]) -> None:
    fields = {(info.alias or name): info for name, info in model.model_fields.items()}
    props = schema.get("properties") or {}
    out.extend(
        f"{path}.{key}: in the CRD, not in {model.__name__}" for key in props.keys() - fields
    )
    out.extend(
        f"{path}.{key}: in {model.__name__}, not in the CRD" for key in fields.keys() - props
    )
    for key in props.keys() & fields.keys():
        prop = props[key]
        if prop.get("type") == "array":
            prop = prop.get("items") or {}
        inner, literal = _model_of(fields[key].annotation)
        if prop.get("enum") and set(prop["enum"]) != set(literal):
            out.append(f"{path}.{key}: enum {prop['enum']} != {list(literal)}")
        if inner is not None and prop.get("properties"):
            _compare(inner, prop, f"{path}.{key}", out)


def test_models_cover_every_crd_field(crd_schema: dict[str, Any]) -> None:
    differences: list[str] = []
    top = {k: v for k, v in crd_schema.items() if k != "properties"}
    # Top-level metadata is ObjectMeta (no properties in the CRD); compare spec and status.
    top["properties"] = {k: v for k, v in crd_schema["properties"].items() if k != "metadata"}
    fields_without_metadata = {"apiVersion", "kind", "spec", "status"}
    assert set(top["properties"]) == fields_without_metadata
    for key in ("spec", "status"):
        inner, _ = _model_of(JobSet.model_fields[key].annotation)
        assert inner is not None
        _compare(inner, crd_schema["properties"][key], key, differences)
    assert differences == []


def test_template_metadata_is_the_embedded_object_meta(crd_schema: dict[str, Any]) -> None:
    rjob = crd_schema["properties"]["spec"]["properties"]["replicatedJobs"]["items"]
    meta = rjob["properties"]["template"]["properties"]["metadata"]
    assert set(meta["properties"]) == {
        f.alias or n for n, f in EmbeddedObjectMeta.model_fields.items()
    }


# --------------------------------------------------------------------------------------------
# Loading from every kind of source


def test_round_trip_of_every_field_is_lossless() -> None:
    jobset = load_jobset(copy.deepcopy(EVERYTHING))
    assert jobset.to_dict() == EVERYTHING
    assert load_jobset(dump_yaml(jobset)).to_dict() == EVERYTHING
    assert jobset.spec.network is not None
    assert jobset.spec.network.enable_dns_hostnames is True
    assert jobset.status is not None
    assert jobset.status.condition("Completed") is not None


def test_dump_is_the_api_server_form() -> None:
    jobset = JobSet.model_validate(minimal(network={"enableDNSHostnames": True}))
    dumped = jobset.to_dict()
    assert dumped == minimal(network={"enableDNSHostnames": True})
    assert "status" not in dumped
    # Must be plain JSON (what a request body carries), not Python objects.
    assert json.loads(json.dumps(dumped)) == dumped


def test_dump_omits_empty_metadata_and_spec_unless_written() -> None:
    assert JobSet().to_dict() == {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet"}
    written = JobSet.model_validate({"metadata": {}, "spec": {}})
    assert written.to_dict() == {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {},
        "spec": {},
    }
    filled = JobSet()
    filled.spec.suspend = True
    filled.metadata.name = "x"
    assert filled.to_dict()["spec"] == {"suspend": True}
    assert filled.to_dict()["metadata"] == {"name": "x"}


def test_nulls_are_absent_fields() -> None:
    document = minimal()
    document["spec"]["suspend"] = None
    document["spec"]["replicatedJobs"][0]["template"]["spec"]["backoffLimit"] = None
    assert load_jobset(document).to_dict() == minimal()


def test_a_null_unknown_field_is_still_unknown() -> None:
    document = minimal()
    document["metadata"]["colour"] = None
    with pytest.raises(SpecError) as raised:
        load_jobset(document)
    assert [(p.path, p.rule) for p in raised.value.problems] == [
        ("metadata.colour", "unknown-field")
    ]


def test_null_list_items_are_zero_values_and_null_labels_empty() -> None:
    document = minimal()
    document["metadata"]["labels"] = {"team": None}
    document["spec"]["successPolicy"] = {"operator": "All", "targetReplicatedJobs": [None]}
    document["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["x"] = None
    jobset = load_jobset(document, allow_unknown_fields=True)
    assert jobset.metadata.labels == {"team": ""}
    assert jobset.spec.success_policy is not None
    assert jobset.spec.success_policy.target_replicated_jobs == [""]
    # In memory the template keeps what was written; a dump leaves the null out.
    assert "x" in jobset.replicated_jobs[0].template.spec["template"]["spec"]
    assert (
        "x"
        not in jobset.to_dict()["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    )


def _sources(tmp_path: Path) -> dict[str, Any]:
    text = yaml.safe_dump(minimal())
    yaml_file = tmp_path / "js.yaml"
    yaml_file.write_text(text)
    json_file = tmp_path / "js.json"
    json_file.write_text(json.dumps(minimal()))
    return {
        "dict": minimal(),
        "yaml-string": text,
        "json-string": json.dumps(minimal()),
        "path-str": str(yaml_file),
        "path-object": yaml_file,
        "json-file": json_file,
        "jobset-model": JobSet.model_validate(minimal()),
        "leading-separator": "---\n" + text + "---\n",
    }


@pytest.mark.parametrize(
    "kind",
    [
        "dict",
        "yaml-string",
        "json-string",
        "path-str",
        "path-object",
        "json-file",
        "jobset-model",
        "leading-separator",
    ],
)
def test_load_from(kind: str, tmp_path: Path) -> None:
    jobset = load_jobset(_sources(tmp_path)[kind])
    assert isinstance(jobset, JobSet)
    assert jobset.to_dict() == minimal()


def test_multi_document_yaml(tmp_path: Path) -> None:
    text = dump_yaml([JobSet.model_validate(minimal("a")), minimal("b"), minimal("c")])
    assert text.count("---") == 2
    path = tmp_path / "many.yml"
    path.write_text(text)
    for source in (text, path, str(path)):
        assert [j.name for j in load_jobsets(source)] == ["a", "b", "c"]
    with pytest.raises(SpecError, match="expected exactly one JobSet, found 3"):
        load_jobset(path)


def test_multi_document_problems_name_the_document() -> None:
    bad = minimal("b")
    bad["spec"]["suspend"] = "yes please"
    text = dump_yaml([minimal("a"), bad, {"apiVersion": "v1", "kind": "ConfigMap"}])
    with pytest.raises(SpecError) as err:
        load_jobsets(text)
    assert [p.path for p in err.value.problems] == ["<document 1>.spec.suspend", "<document 2>"]
    assert "expected kind JobSet" in err.value.problems[1].message


@pytest.mark.parametrize(
    ("source", "message"),
    [
        pytest.param("a: [unclosed\n", "not valid YAML at line 2", id="bad-yaml"),
        pytest.param("", "expected exactly one JobSet, found 0", id="empty"),
        pytest.param("- 1\n- 2\n", "expected a mapping", id="list-document"),
        pytest.param("missing/file.yaml", "cannot read missing/file.yaml", id="missing-file"),
        pytest.param(
            {"apiVersion": "jobset.x-k8s.io/v1", "kind": "JobSet"},
            "apiVersion 'jobset.x-k8s.io/v1'",
            id="wrong-version",
        ),
    ],
)
def test_load_errors(source: Any, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        load_jobset(source)


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    bad = minimal()
    bad["spec"]["suspnd"] = True
    path.write_text(yaml.safe_dump(bad))
    with pytest.raises(SpecError) as err:
        load_jobset(path)
    assert err.value.source == str(path)
    assert str(err.value).startswith(f"{path}: spec.suspnd: unknown field")


# --------------------------------------------------------------------------------------------
# Objects of the official kubernetes client (30 on the KFP side, 36 on the Airflow side)


def test_kubernetes_client_objects_inside_a_mapping() -> None:
    from kubernetes import client

    pod_spec = client.V1PodSpec(
        restart_policy="Never",
        containers=[
            client.V1Container(
                name="main",
                image="busybox",
                ports=[client.V1ContainerPort(container_port=3389)],
                resources=client.V1ResourceRequirements(limits={"nvidia.com/gpu": "1"}),
                env=[
                    client.V1EnvVar(
                        name="RANK",
                        value_from=client.V1EnvVarSource(
                            field_ref=client.V1ObjectFieldSelector(
                                field_path="metadata.labels['jobset.sigs.k8s.io/job-index']"
                            )
                        ),
                    )
                ],
            )
        ],
    )
    template = client.V1JobTemplateSpec(
        metadata=client.V1ObjectMeta(labels={"role": "w"}),
        spec=client.V1JobSpec(
            parallelism=2,
            completions=2,
            template=client.V1PodTemplateSpec(spec=pod_spec),
        ),
    )
    document = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": client.V1ObjectMeta(
            name="k8s",
            creation_timestamp=dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
        ),
        "spec": {"replicatedJobs": [{"name": "workers", "replicas": 2, "template": template}]},
    }
    jobset = load_jobset(document)
    assert jobset.to_dict() == {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "k8s", "creationTimestamp": "2026-01-02T03:04:05Z"},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": 2,
                    "template": {
                        "metadata": {"labels": {"role": "w"}},
                        "spec": {
                            "parallelism": 2,
                            "completions": 2,
                            "template": {
                                "spec": {
                                    "restartPolicy": "Never",
                                    "containers": [
                                        {
                                            "name": "main",
                                            "image": "busybox",
                                            "ports": [{"containerPort": 3389}],
                                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                                            "env": [
                                                {
                                                    "name": "RANK",
                                                    "valueFrom": {
                                                        "fieldRef": {
                                                            "fieldPath": "metadata.labels"
                                                            "['jobset.sigs.k8s.io/job-index']"
                                                        }
                                                    },
                                                }
                                            ],
                                        }
                                    ],
                                }
                            },
                        },
                    },
                }
            ]
        },
    }


def test_kubernetes_pod_spec_inside_a_plain_template() -> None:
    from kubernetes import client

    pod_spec = client.V1PodSpec(
        restart_policy="Never", containers=[client.V1Container(name="main", image="busybox")]
    )
    document = minimal()
    job_spec = document["spec"]["replicatedJobs"][0]["template"]["spec"]
    job_spec["template"] = {"metadata": client.V1ObjectMeta(labels={"a": "b"}), "spec": pod_spec}
    expected = minimal()
    expected["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"] = {
        "labels": {"a": "b"}
    }
    assert load_jobset(document).to_dict() == expected
    # Also when the models are built directly, without the loader.
    assert JobSet.model_validate(document).to_dict() == expected


def test_kubernetes_client_objects_agree_with_the_client_serializer() -> None:
    from kubernetes import client

    meta = client.V1ObjectMeta(
        name="n",
        labels={"a": "b"},
        creation_timestamp=dt.datetime(2026, 5, 6, 7, 8, 9, tzinfo=dt.UTC),
    )
    expected = client.ApiClient().sanitize_for_serialization(meta)
    assert to_plain(meta)["name"] == expected["name"]
    assert to_plain(meta)["labels"] == expected["labels"]
    # The client writes microseconds/offsets in varying ways; the API server form is RFC 3339.
    assert to_plain(meta)["creationTimestamp"] == "2026-05-06T07:08:09Z"


def test_kubernetes_client_object_as_a_model_field() -> None:
    from kubernetes import client

    jobset = JobSet(metadata=client.V1ObjectMeta(name="direct", namespace="ns"))
    assert jobset.metadata.name == "direct"
    assert jobset.to_dict()["metadata"] == {"name": "direct", "namespace": "ns"}


# --------------------------------------------------------------------------------------------
# Unknown fields


def _set(document: dict[str, Any], path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    node: Any = document
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return document


@pytest.mark.parametrize(
    ("where", "expected_path"),
    [
        pytest.param(("kindd",), "kindd", id="top-level"),
        pytest.param(("metadata", "labelz"), "metadata.labelz", id="metadata"),
        pytest.param(("spec", "replicatedJob"), "spec.replicatedJob", id="spec"),
        pytest.param(
            ("spec", "replicatedJobs", 0, "replica"),
            "spec.replicatedJobs[0].replica",
            id="replicated-job",
        ),
        pytest.param(
            ("spec", "replicatedJobs", 0, "template", "metdata"),
            "spec.replicatedJobs[0].template.metdata",
            id="job-template",
        ),
        pytest.param(
            ("spec", "replicatedJobs", 0, "template", "metadata"),
            "spec.replicatedJobs[0].template.metadata.generateName",
            id="embedded-metadata-keeps-five-fields",
        ),
        pytest.param(("spec", "network"), "spec.network.enableDnsHostnames", id="network-spelling"),
        pytest.param(
            ("spec", "failurePolicy"), "spec.failurePolicy.rules[1].targetReplicatedJob", id="rule"
        ),
        pytest.param(("status",), "status.replicatedJobsStatus[0].readyy", id="status"),
    ],
)
def test_unknown_field_is_an_error_with_its_full_path(
    where: tuple[str | int, ...], expected_path: str
) -> None:
    values: dict[str, Any] = {
        "network": {"enableDnsHostnames": True},
        "failurePolicy": {
            "rules": [{"action": "FailJobSet"}, {"action": "FailJobSet", "targetReplicatedJob": []}]
        },
        "status": {"replicatedJobsStatus": [{"name": "workers", "readyy": 1}]},
        "metadata": {"generateName": "x-"},
    }
    document = _set(minimal(), where, values.get(str(where[-1]), "typo"))
    with pytest.raises(SpecError) as err:
        load_jobset(document)
    assert [(p.path, p.rule) for p in err.value.problems] == [(expected_path, UNKNOWN)]
    assert "allow_unknown_fields=True" in err.value.problems[0].message


def test_all_problems_are_reported_at_once() -> None:
    document = minimal()
    document["spec"]["replicatedJobs"][0]["replicas"] = "2"
    document["spec"]["replicatedJobs"][0]["dependson"] = []
    document["spec"]["successPolicy"] = {"operator": "Every"}
    document["spec"]["failurePolicy"] = {
        "rules": [{"action": "FailJobSet", "onJobFailureReasons": ["Evicted"]}],
        "maxRestart": 3,
    }
    document["metadata"]["nmae"] = "typo"
    with pytest.raises(SpecError) as err:
        load_jobset(document)
    assert [(p.path, p.rule) for p in err.value.problems] == [
        ("metadata.nmae", UNKNOWN),
        ("spec.failurePolicy.maxRestart", UNKNOWN),
        ("spec.failurePolicy.rules[0].onJobFailureReasons[0]", "literal_error"),
        ("spec.replicatedJobs[0].dependson", UNKNOWN),
        ("spec.replicatedJobs[0].replicas", "int_type"),
        ("spec.successPolicy.operator", "literal_error"),
    ]
    messages = {p.path: p.message for p in err.value.problems}
    assert "'All' or 'Any'" in messages["spec.successPolicy.operator"]
    assert "'Every'" in messages["spec.successPolicy.operator"]
    assert len(str(err.value).splitlines()) == 6


@pytest.mark.parametrize(
    ("where", "value", "rule"),
    [
        pytest.param(("spec", "suspend"), "true", "bool_type", id="bool-as-string"),
        pytest.param(("spec", "ttlSecondsAfterFinished"), -1, "greater_than_equal", id="negative"),
        pytest.param(
            ("spec", "replicatedJobs", 0, "replicas"), 2**31, "less_than_equal", id="int32"
        ),
        pytest.param(("spec", "replicatedJobs", 0, "name"), None, "missing", id="required"),
        pytest.param(("spec", "startupPolicy"), {"startupPolicyOrder": "Random"}, "literal_error"),
        pytest.param(("metadata", "labels"), {"a": 1}, "string_type", id="label-value"),
    ],
)
def test_type_errors(where: tuple[str | int, ...], value: Any, rule: str) -> None:
    with pytest.raises(SpecError) as err:
        load_jobset(_set(minimal(), where, value))
    assert [p.rule for p in err.value.problems] == [rule]


def test_allow_unknown_fields_carries_them_through_a_dump() -> None:
    document = minimal()
    document["spec"]["elasticPolicy"] = {"maxReplicas": 8}
    document["spec"]["replicatedJobs"][0]["priority"] = 3
    document["spec"]["replicatedJobs"][0]["template"]["metadata"] = {"generateName": "w-"}
    document["metadata"]["futureField"] = ["x"]
    document["status"] = {"executionAttempts": 2}
    with pytest.raises(SpecError) as err:
        load_jobset(document)
    assert len(err.value.problems) == 5
    jobset = load_jobset(document, allow_unknown_fields=True)
    assert jobset.to_dict() == document
    assert yaml.safe_load(dump_yaml(jobset)) == document
    assert load_jobset(dump_yaml(jobset), allow_unknown_fields=True).to_dict() == document


def test_unknown_fields_walks_lists_and_nested_models() -> None:
    document = minimal()
    document["spec"]["replicatedJobs"].append({"name": "b", "template": {}, "x": 1})
    document["spec"]["replicatedJobs"][0]["template"]["spec"]["anything"] = {"goes": 1}
    assert list(unknown_fields(JobSet, document)) == [("spec", "replicatedJobs", 1, "x")]
