"""Names derived by the upstream controller, and the API machinery's DNS / label-value rules."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jobset_core import naming
from jobset_core.models import JobSet

DNS1123_LABEL_REGEX_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
DNS1123_SUBDOMAIN_REGEX_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
DNS1035_REGEX_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)
LABEL_VALUE_REGEX_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


def jobset(name: str = "myjs", **spec: Any) -> JobSet:
    return JobSet.model_validate({"metadata": {"name": name}, "spec": spec})


@pytest.mark.parametrize(
    ("jobset_name", "rjob", "index", "expected"),
    [
        ("myjs", "workers", 0, "myjs-workers-0"),
        ("a", "b", 12, "a-b-12"),
        ("pytorch", "workers-x", 3, "pytorch-workers-x-3"),
    ],
    ids=["first", "two-digit-index", "dash-in-rjob"],
)
def test_job_name(jobset_name: str, rjob: str, index: int, expected: str) -> None:
    assert naming.job_name(jobset_name, rjob, index) == expected


def test_pod_hostname() -> None:
    assert naming.pod_hostname("myjs-workers-1", 3) == "myjs-workers-1-3"


@pytest.mark.parametrize(
    ("namespace", "job", "expected"),
    [
        # The upstream test vector (jobset-api.md §3.2), computed by the controller.
        ("default", "myjs-workers-0", "8c93757f4652cb827cc74a49eb07604e615c6993"),
        # `printf 'a/b' | sha1sum` (coreutils).
        ("a", "b", "3ec69c85a4ff96830024afeef2d4e512181c8f7b"),
    ],
    ids=["upstream-vector", "short"],
)
def test_job_key_is_sha1_of_namespaced_name(namespace: str, job: str, expected: str) -> None:
    assert naming.job_key(namespace, job) == expected


def test_job_key_depends_on_namespace() -> None:
    assert naming.job_key("ns1", "j-r-0") != naming.job_key("ns2", "j-r-0")


def test_namespaced_job_name_uses_underscore() -> None:
    assert naming.namespaced_job_name("default", "myjs-workers-0") == "default_myjs-workers-0"


def test_pvc_name_is_template_then_jobset() -> None:
    assert naming.pvc_name("data", "myjs") == "data-myjs"


@pytest.mark.parametrize(
    ("network", "expected"),
    [
        (None, "myjs"),
        ({}, "myjs"),
        ({"subdomain": ""}, "myjs"),
        ({"subdomain": "custom"}, "custom"),
        ({"enableDNSHostnames": False, "subdomain": "custom"}, "custom"),
    ],
    ids=["no-network", "empty-network", "empty-subdomain", "custom", "custom-dns-off"],
)
def test_subdomain(network: dict[str, Any] | None, expected: str) -> None:
    spec = {} if network is None else {"network": network}
    assert naming.subdomain(jobset(**spec)) == expected


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({}, None),
        ({"coordinator": {"replicatedJob": "driver"}}, "myjs-driver-0-0.myjs"),
        (
            {"coordinator": {"replicatedJob": "workers", "jobIndex": 1, "podIndex": 3}},
            "myjs-workers-1-3.myjs",
        ),
        (
            {
                "coordinator": {"replicatedJob": "workers", "jobIndex": 0, "podIndex": 2},
                "network": {"subdomain": "net"},
            },
            "myjs-workers-0-2.net",
        ),
    ],
    ids=["none", "indexes-default-to-zero", "explicit-indexes", "custom-subdomain"],
)
def test_coordinator_endpoint(spec: dict[str, Any], expected: str | None) -> None:
    assert naming.coordinator_endpoint(jobset(**spec)) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("a", []),
        ("0", []),
        ("a-1", []),
        ("a--1--2--b", []),
        ("1-a", []),
        ("a" * 63, []),
        ("a" * 64, ["must be no more than 63 characters"]),
        ("a.b", ["must not contain dots"]),
        ("", [DNS1123_LABEL_REGEX_MSG]),
        ("A", [DNS1123_LABEL_REGEX_MSG]),
        ("-a", [DNS1123_LABEL_REGEX_MSG]),
        ("a_b", [DNS1123_LABEL_REGEX_MSG]),
        ("a" * 64 + "_", ["must be no more than 63 characters", DNS1123_LABEL_REGEX_MSG]),
        ("a\n", [DNS1123_LABEL_REGEX_MSG]),
    ],
    ids=lambda v: repr(v)[:20] if isinstance(v, str) else None,
)
def test_dns1123_label_errors(value: str, expected: list[str]) -> None:
    assert naming.dns1123_label_errors(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("a", []),
        ("a.b.c", []),
        ("0.a", []),
        ("a" * 253, []),
        ("a" * 254, ["must be no more than 253 characters"]),
        ("a..b", [DNS1123_SUBDOMAIN_REGEX_MSG]),
        ("A.b", [DNS1123_SUBDOMAIN_REGEX_MSG]),
        ("a.", [DNS1123_SUBDOMAIN_REGEX_MSG]),
    ],
    ids=lambda v: repr(v)[:20] if isinstance(v, str) else None,
)
def test_dns1123_subdomain_errors(value: str, expected: list[str]) -> None:
    assert naming.dns1123_subdomain_errors(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("a", []),
        ("my-name", []),
        ("abc-123", []),
        ("a" * 63, []),
        ("a" * 64, ["must be no more than 63 characters"]),
        ("1abc", [DNS1035_REGEX_MSG]),
        ("abc-", [DNS1035_REGEX_MSG]),
        ("a.b", [DNS1035_REGEX_MSG]),
        ("Abc", [DNS1035_REGEX_MSG]),
        ("", [DNS1035_REGEX_MSG]),
    ],
    ids=lambda v: repr(v)[:20] if isinstance(v, str) else None,
)
def test_dns1035_label_errors(value: str, expected: list[str]) -> None:
    assert naming.dns1035_label_errors(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", []),
        ("MyValue", []),
        ("my_value.v-1", []),
        ("12345", []),
        ("myjs-workers-0-0.myjs", []),
        ("a" * 63, []),
        ("a" * 64, ["must be no more than 63 bytes"]),
        ("é", [LABEL_VALUE_REGEX_MSG]),
        ("é" * 32, ["must be no more than 63 bytes", LABEL_VALUE_REGEX_MSG]),
        ("-a", [LABEL_VALUE_REGEX_MSG]),
        ("a/b", [LABEL_VALUE_REGEX_MSG]),
    ],
    ids=lambda v: repr(v)[:20] if isinstance(v, str) else None,
)
def test_label_value_errors(value: str, expected: list[str]) -> None:
    assert naming.label_value_errors(value) == expected


# --- the same messages from the real API server and JobSet webhook (devcluster) ---------------


def _rejection(create: Any) -> str:
    from kubernetes.client.rest import ApiException

    try:
        create()
    except ApiException as err:
        assert err.status == 422, err.body
        message: str = json.loads(err.body)["message"]
        return message
    pytest.fail("the API server accepted it")


@pytest.mark.cluster
@pytest.mark.parametrize(
    "value", ["-a", "a" * 64, "é", "a b"], ids=["dash", "long", "utf8", "space"]
)
def test_label_value_messages_match_the_api_server(value: str, devcluster: Any) -> None:
    body = {"metadata": {"name": "probe", "labels": {"k": value}}}
    message = _rejection(
        lambda: devcluster.core.create_namespaced_config_map("default", body, dry_run="All")
    )
    errors = naming.label_value_errors(value)
    assert errors
    assert all(error in message for error in errors), message


@pytest.mark.cluster
@pytest.mark.parametrize("value", ["a.b", "-a", "Bad_Name"], ids=["dots", "dash", "upper"])
def test_dns1123_label_messages_match_the_api_server(value: str, devcluster: Any) -> None:
    body = {"metadata": {"name": value}}
    message = _rejection(lambda: devcluster.core.create_namespace(body, dry_run="All"))
    errors = naming.dns1123_label_errors(value)
    assert errors
    assert all(f'metadata.name: Invalid value: "{value}": {e}' in message for e in errors), message


@pytest.mark.cluster
@pytest.mark.parametrize("group", ["Bad", "1group", "g-"], ids=["upper", "digit-first", "dash-end"])
def test_dns1035_label_messages_match_the_jobset_webhook(group: str, devcluster: Any) -> None:
    body = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "probe"},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "w",
                    "groupName": group,
                    "template": {
                        "spec": {
                            "template": {"spec": {"containers": [{"name": "m", "image": "x"}]}}
                        }
                    },
                }
            ]
        },
    }
    message = _rejection(lambda: devcluster.create_jobset("default", body, dry_run=True))
    errors = naming.dns1035_label_errors(group)
    assert errors
    assert all(error in message for error in errors), message
