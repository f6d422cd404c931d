"""The schema facts kept in ``jobset_core.validation._k8s_schema`` equal the JobSet CRD's.

The client models carry the Job template's schema, except four facts we keep as tables:
quantities (``x-kubernetes-int-or-string`` fields typed ``str`` by the client), the integers of
``format: int64`` (all others are ``int32``), lists the CRD declares as maps or sets, and fields
older clients require but the CRD does not. The depth of the whole CRD schema bounds the
nesting of any valid JobSet, far below :data:`jobset_core.limits.MAX_DEPTH`. These tests
walk the CRD (read from the downloaded JobSet Go module) and the installed client's models side
by side, so any drift fails. Fields the installed client does not know are not compared (the
kfp side's client 30 is older than the CRD's Kubernetes 1.36 schema).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any

import kubernetes.client
import pytest
import yaml

from jobset_core.limits import MAX_DEPTH
from jobset_core.validation._k8s_schema import (
    INT64_FIELDS,
    LIST_MAP_KEYS,
    NOT_REQUIRED,
    QUANTITY_FIELDS,
    _required_attrs,
    _type_name,
)
from tests.core.conftest import locate_jobset_module

CRD_PATH = "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml"


@cache
def _schema() -> dict[str, Any]:
    root, error = locate_jobset_module()
    if root is None:
        pytest.fail(f"cannot read the JobSet CRD: {error}")
    crd = yaml.safe_load((root / CRD_PATH).read_text(encoding="utf-8"))
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _job_spec_schema() -> dict[str, Any]:
    rjob = _schema()["properties"]["spec"]["properties"]["replicatedJobs"]["items"]
    job_spec: dict[str, Any] = rjob["properties"]["template"]["properties"]["spec"]
    return job_spec


def _claim_template_schema() -> dict[str, Any]:
    policies = _schema()["properties"]["spec"]["properties"]["volumeClaimPolicies"]
    template: dict[str, Any] = policies["items"]["properties"]["templates"]["items"]
    return template


def _inner(type_: str) -> str:
    while type_.startswith(("list[", "dict(", "dict[")):
        type_ = (
            type_[5:-1] if type_.startswith("list[") else type_[type_.index(",") + 1 : -1].strip()
        )
    return type_


def _element(node: dict[str, Any]) -> dict[str, Any]:
    while "items" in node or isinstance(node.get("additionalProperties"), dict):
        node = node["items"] if "items" in node else node["additionalProperties"]
    return node


Field = tuple[str, str, str, dict[str, Any]]  # class, attribute, client type, CRD node


@cache
def _fields() -> tuple[Field, ...]:
    found: list[Field] = []
    seen: set[str] = set()

    def walk(class_name: str, node: dict[str, Any]) -> Iterator[Field]:
        if class_name in seen:
            return
        seen.add(class_name)
        cls = getattr(kubernetes.client, class_name)
        by_json = {json: attr for attr, json in cls.attribute_map.items()}
        for key, child in (node.get("properties") or {}).items():
            attr = by_json.get(key)
            if attr is None:
                continue  # newer than the installed client
            type_ = _type_name(cls.openapi_types[attr])  # client 37 spells List[...], Dict[...]
            yield class_name, attr, type_, child
            inner = _inner(type_)
            if inner.startswith("V1") or inner.startswith("Core"):
                yield from walk(inner, _element(child))

    found.extend(walk("V1JobSpec", _job_spec_schema()))
    found.extend(walk("V1PersistentVolumeClaim", _claim_template_schema()))
    return tuple(found)


def _classes() -> set[str]:
    return {class_name for class_name, *_ in _fields()}


def _reachable(pairs: Any) -> set[tuple[str, str]]:
    known = {(c, a) for c, a, *_ in _fields()}
    return {pair for pair in pairs if pair in known}


def test_walk_covers_the_pod_spec() -> None:
    assert {
        "V1JobSpec",
        "V1PodSpec",
        "V1Container",
        "V1Volume",
        "V1ResourceRequirements",
    } <= _classes()
    assert len(_classes()) > 80


def test_quantity_fields() -> None:
    crd = {
        (c, a)
        for c, a, type_, node in _fields()
        if _element(node).get("x-kubernetes-int-or-string") and _inner(type_) == "str"
    }
    assert crd == _reachable(QUANTITY_FIELDS)
    assert crd  # resources.limits at least


def test_int_or_string_fields_that_are_not_quantities_accept_anything_in_the_client() -> None:
    for c, a, type_, node in _fields():
        if _element(node).get("x-kubernetes-int-or-string") and (c, a) not in QUANTITY_FIELDS:
            assert _inner(type_) == "object", (c, a, type_)


def test_list_map_keys() -> None:
    crd = {
        (c, a): tuple(node.get("x-kubernetes-list-map-keys") or ())
        for c, a, _, node in _fields()
        if node.get("x-kubernetes-list-type") in ("map", "set")
    }
    expected = {
        pair: keys for pair, keys in LIST_MAP_KEYS.items() if pair in _reachable(LIST_MAP_KEYS)
    }
    assert crd == expected


def _client_required(class_name: str) -> set[str]:
    """What the client requires, before :data:`NOT_REQUIRED` is taken off."""
    config = kubernetes.client.Configuration.get_default_copy()
    config.client_side_validation = True
    return _required_attrs(getattr(kubernetes.client, class_name), config)


def _crd_required() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {"V1JobSpec": set(_job_spec_schema().get("required") or ())}
    for _, _, type_, node in _fields():
        inner = _inner(type_)
        if inner.startswith("V1"):
            cls = getattr(kubernetes.client, inner)
            by_json = {json: attr for attr, json in cls.attribute_map.items()}
            out[inner] = {by_json[k] for k in _element(node).get("required") or () if k in by_json}
    return out


def test_required_fields_of_the_client_are_required_by_the_crd_except_the_known_ones() -> None:
    crd = _crd_required()
    only_client = {(c, a) for c in crd for a in _client_required(c) - crd[c]}
    assert only_client <= NOT_REQUIRED
    only_crd = {(c, a) for c in crd for a in crd[c] - _client_required(c)}
    assert only_crd == set()  # every field the CRD requires is reported when missing
    for class_name, attr in NOT_REQUIRED:
        assert attr not in crd.get(class_name, set())


def test_integer_formats() -> None:
    formats = {
        (c, a): _element(node).get("format")
        for c, a, type_, node in _fields()
        if _inner(type_) == "int"
    }
    assert formats
    assert {pair for pair, fmt in formats.items() if fmt == "int64"} == _reachable(INT64_FIELDS)
    assert {fmt for pair, fmt in formats.items() if pair not in INT64_FIELDS} == {"int32"}


def _depth(node: dict[str, Any]) -> int:
    """Levels of data a document of this schema can have (a scalar is one level)."""
    children = [*(node.get("properties") or {}).values()]
    if isinstance(node.get("items"), dict):
        children.append(node["items"])
    if isinstance(node.get("additionalProperties"), dict):
        children.append(node["additionalProperties"])
    return 1 + max((_depth(child) for child in children), default=0)


def test_no_valid_jobset_comes_near_the_depth_limit() -> None:
    def preserves_unknown(node: Any) -> bool:
        if isinstance(node, dict):
            if node.get("x-kubernetes-preserve-unknown-fields"):
                return True
            return any(preserves_unknown(value) for value in node.values())
        if isinstance(node, list):
            return any(preserves_unknown(value) for value in node)
        return False

    assert not preserves_unknown(_schema())  # no free-form field: the schema bounds the depth
    assert _depth(_schema()) == 19  # the number the depth limit's message quotes
    assert 3 * _depth(_schema()) <= MAX_DEPTH
