"""The pure core of the client layer: requests, selectors, error mapping, retry decisions."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from jobset_core.client import _core
from jobset_core.client._core import (
    CONFIG_MAP,
    JOB,
    JOBSET,
    POD,
    SERVICE,
    Request,
    RetryPolicy,
    error_from_response,
    parse_retry_after,
    render_selector,
    retry_delay,
)
from jobset_core.errors import (
    ApiError,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    Problem,
    ServerError,
    TooManyRequests,
    Unauthorized,
    Unreachable,
)
from jobset_core.models import JobSet

# --------------------------------------------------------------------------- requests


@pytest.mark.parametrize(
    ("resource", "name", "path"),
    [
        pytest.param(
            JOBSET, "js", "/apis/jobset.x-k8s.io/v1alpha2/namespaces/ns/jobsets/js", id="jobset"
        ),
        pytest.param(JOB, "j", "/apis/batch/v1/namespaces/ns/jobs/j", id="job"),
        pytest.param(SERVICE, "s", "/api/v1/namespaces/ns/services/s", id="service-core-group"),
        pytest.param(CONFIG_MAP, "c", "/api/v1/namespaces/ns/configmaps/c", id="configmap"),
        pytest.param(POD, "p", "/api/v1/namespaces/ns/pods/p", id="pod"),
        pytest.param(
            JOBSET,
            "a/b c",
            "/apis/jobset.x-k8s.io/v1alpha2/namespaces/ns/jobsets/a%2Fb%20c",
            id="name-escaped",
        ),
    ],
)
def test_get_paths(resource: Any, name: str, path: str) -> None:
    request = _core.get(resource, "ns", name)
    assert (request.method, request.path, request.query, request.body) == ("GET", path, (), None)
    assert request.idempotent


@pytest.mark.parametrize("bad", ["", ".", ".."], ids=["empty", "dot", "dotdot"])
def test_names_that_would_change_the_path_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="not a valid"):
        _core.get(JOB, "ns", bad)
    with pytest.raises(ValueError, match="not a valid"):
        _core.list_(JOB, bad)


def test_create_takes_models_and_dicts_and_dry_run() -> None:
    jobset = JobSet.model_validate({"metadata": {"name": "x"}, "spec": {"suspend": True}})
    request = _core.create(JOBSET, "ns", jobset, dry_run=True, field_manager="me")
    assert request.method == "POST"
    assert request.path == "/apis/jobset.x-k8s.io/v1alpha2/namespaces/ns/jobsets"
    assert request.query == (
        ("dryRun", "All"),
        ("fieldManager", "me"),
        ("fieldValidation", "Strict"),
    )
    lax = _core.create(JOBSET, "ns", jobset, field_validation=None)
    assert lax.query == ()
    assert request.body == {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "x"},
        "spec": {"suspend": True},
    }
    assert request.idempotent  # a fixed name: a repeat finds the first's object (409)
    assert _core.create(JOB, "ns", {"kind": "Job"}).query == (("fieldValidation", "Strict"),)


@pytest.mark.parametrize(
    ("metadata", "repeatable"),
    [
        ({"name": "x"}, True),
        ({"generateName": "x-"}, False),  # a repeat makes a second object
        ({"name": ""}, False),
        ({}, False),
        (None, False),
    ],
)
def test_only_a_create_of_a_fixed_name_is_repeated_after_a_lost_answer(
    metadata: Any, repeatable: bool
) -> None:
    body: dict[str, Any] = {"kind": "Job"}
    if metadata is not None:
        body["metadata"] = metadata
    assert _core.create(JOB, "ns", body).idempotent is repeatable
    assert not _core.patch(JOB, "ns", "x", {"metadata": {"name": "x"}}).idempotent


def test_create_refuses_non_objects() -> None:
    with pytest.raises(TypeError, match="object or a list"):
        _core.create(JOB, "ns", "kind: Job")


def test_list_and_watch_queries() -> None:
    listing = _core.list_(
        JOB, "ns", label_selector={"a": "1"}, field_selector="status.phase=Running"
    )
    assert listing.query == (("labelSelector", "a=1"), ("fieldSelector", "status.phase=Running"))
    assert (listing.verb, listing.resource) == ("list", "jobs.batch")
    request = _core.watch(
        JOBSET, "ns", resource_version="42", label_selector={"b": None}, timeout_seconds=30
    )
    assert request.query == (
        ("watch", "true"),
        ("allowWatchBookmarks", "true"),
        ("resourceVersion", "42"),
        ("labelSelector", "b"),
        ("timeoutSeconds", "30"),
    )
    assert request.idempotent
    assert ("resourceVersion", "") not in _core.watch(JOB, "ns", resource_version="").query


@pytest.mark.parametrize(
    ("patch_type", "body", "content_type"),
    [
        pytest.param(
            "merge",
            {"metadata": {"labels": {"a": "b"}}},
            "application/merge-patch+json",
            id="merge",
        ),
        pytest.param(
            "json",
            [{"op": "add", "path": "/x", "value": 1}],
            "application/json-patch+json",
            id="json",
        ),
        pytest.param(
            "strategic", {"spec": {}}, "application/strategic-merge-patch+json", id="strategic"
        ),
    ],
)
def test_patch_content_types(patch_type: Any, body: Any, content_type: str) -> None:
    request = _core.patch(CONFIG_MAP, "ns", "anchor", body, patch_type=patch_type)
    assert (request.method, request.content_type, request.body) == ("PATCH", content_type, body)


@pytest.mark.parametrize(
    ("patch_type", "body"),
    [
        pytest.param("json", {"op": "add"}, id="json-patch-needs-a-list"),
        pytest.param("merge", [{"op": "add"}], id="merge-patch-needs-an-object"),
        pytest.param("apply", {}, id="unknown-type"),
    ],
)
def test_patch_refuses_mismatched_bodies(patch_type: Any, body: Any) -> None:
    with pytest.raises(ValueError, match="patch"):
        _core.patch(JOB, "ns", "j", body, patch_type=patch_type)


def test_patch_of_a_subresource() -> None:
    request = _core.patch(JOBSET, "ns", "js", {"status": {}}, subresource="status")
    assert request.path.endswith("/jobsets/js/status")


@pytest.mark.parametrize(
    ("kwargs", "options"),
    [
        pytest.param({}, {"propagationPolicy": "Foreground"}, id="foreground-default"),
        pytest.param(
            {"propagation": "Background"}, {"propagationPolicy": "Background"}, id="background"
        ),
        pytest.param(
            {"uid": "u-1", "grace_period_seconds": 0},
            {
                "propagationPolicy": "Foreground",
                "preconditions": {"uid": "u-1"},
                "gracePeriodSeconds": 0,
            },
            id="uid-precondition",
        ),
    ],
)
def test_delete_options(kwargs: dict[str, Any], options: dict[str, Any]) -> None:
    request = _core.delete(JOB, "ns", "j", **kwargs)
    assert request.method == "DELETE"
    assert request.body == {"apiVersion": "v1", "kind": "DeleteOptions", **options}


def test_pod_log_and_discovery() -> None:
    request = _core.pod_log("ns", "p", container="c", tail_lines=10, follow=True, previous=True)
    assert request.path == "/api/v1/namespaces/ns/pods/p/log"
    assert request.query == (
        ("container", "c"),
        ("tailLines", "10"),
        ("follow", "true"),
        ("previous", "true"),
    )
    assert _core.pod_log("ns", "p").query == ()
    assert _core.discovery().path == "/apis/jobset.x-k8s.io/v1alpha2"


# --------------------------------------------------------------------------- selectors


@pytest.mark.parametrize(
    ("selector", "rendered"),
    [
        pytest.param(None, None, id="none"),
        pytest.param("", None, id="empty-string"),
        pytest.param({}, None, id="empty-mapping"),
        pytest.param("a=b,c!=d", "a=b,c!=d", id="string-passes-through"),
        pytest.param(
            {"jobset.sigs.k8s.io/jobset-name": "x"},
            "jobset.sigs.k8s.io/jobset-name=x",
            id="equality",
        ),
        pytest.param({"a": "1", "b": "2"}, "a=1,b=2", id="several-in-order"),
        pytest.param({"a": ["x", "y"]}, "a in (x,y)", id="set"),
        pytest.param({"a": None}, "a", id="exists"),
        pytest.param({"a": ""}, "a=", id="empty-value"),
    ],
)
def test_render_selector(selector: Any, rendered: str | None) -> None:
    assert render_selector(selector) == rendered


@pytest.mark.parametrize(
    "selector",
    [
        pytest.param({"a": "x,y"}, id="comma-in-value"),
        pytest.param({"a b": "x"}, id="space-in-key"),
        pytest.param({"": "x"}, id="empty-key"),
        pytest.param({"a": []}, id="empty-set"),
        pytest.param({"a": ["x)"]}, id="paren-in-set"),
    ],
)
def test_render_selector_refuses_what_would_change_its_meaning(selector: Any) -> None:
    with pytest.raises(ValueError, match="selector"):
        render_selector(selector)


# --------------------------------------------------------------------------- answers


def test_decode_list_fills_item_kind_and_keeps_the_resource_version() -> None:
    answer = {
        "kind": "JobSetList",
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "metadata": {"resourceVersion": "77", "continue": "next"},
        "items": [{"metadata": {"name": "a"}, "spec": {}, "futureField": 1}],
    }
    listing = _core.decode_list(json.dumps(answer).encode(), JOBSET, _core.decode_jobset)
    assert (listing.resource_version, listing.continue_) == ("77", "next")
    (item,) = listing.items
    assert (item.kind, item.api_version, item.name) == ("JobSet", "jobset.x-k8s.io/v1alpha2", "a")
    assert item.to_dict()["futureField"] == 1  # unknown fields survive

    plain = _core.decode_list(b'{"kind": "PodList", "apiVersion": "v1", "items": []}', POD, dict)
    assert (plain.items, plain.resource_version, plain.continue_) == ([], "", "")


#: One list, as a custom resource's (keys sorted: the list's kind after its items), pretty
#: printed, with an item a caller drops and one whose own kind stays.
_LIST_TEXTS = {
    "sorted keys": '{"apiVersion":"v1","items":[{"metadata":{"name":"a"}},{"metadata":'
    '{"name":"b"}},{"kind":"Other","metadata":{"name":"c"}}],"kind":"PodList",'
    '"metadata":{"resourceVersion":"9"}}',
    "pretty": '{\n  "kind" : "PodList",\n  "metadata" : { "resourceVersion" : "9" } ,\n'
    '  "items" : [\n    {"metadata": {"name": "a"}} ,\n    {"metadata": {"name": "b"}},\n'
    '    {"kind": "Other", "metadata": {"name": "c"}}\n  ]\n}\n',
}


@pytest.mark.parametrize("text", list(_LIST_TEXTS.values()), ids=list(_LIST_TEXTS))
def test_decode_list_gives_each_item_to_the_caller_in_order(text: str) -> None:
    seen: list[str] = []

    def each(obj: dict[str, Any]) -> dict[str, Any] | None:
        seen.append(obj["metadata"]["name"])
        return None if obj["metadata"]["name"] == "b" else obj

    for body in (text, text.encode()):
        seen.clear()
        listing = _core.decode_list(body, POD, each)
        assert seen == ["a", "b", "c"]
        assert [(o["kind"], o["apiVersion"], o["metadata"]["name"]) for o in listing.items] == [
            ("Pod", "v1", "a"),
            ("Other", "v1", "c"),
        ]
        assert listing.resource_version == "9"


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"[]",
        b'{"items": [1]}',
        b'{"items": [{"a": 1} {"b": 2}]}',
        b'{"items": [{"a": 1}',
        b'{"metadata": {} "items": []}',
        b'{"items": []} trailing',
        b'{"items": [{"a": tru}]}',
        b'{"items": []',
    ],
)
def test_decode_list_refuses_what_is_not_a_list_answer(body: bytes) -> None:
    with pytest.raises(ServerError) as refused:
        _core.decode_list(body, POD, dict)
    assert refused.value.reason == "UnexpectedResponse"


def test_as_object_refuses_non_objects() -> None:
    with pytest.raises(ServerError):
        _core.as_object(["not", "an", "object"])


@pytest.mark.parametrize(
    ("document", "served"),
    [
        pytest.param(
            {
                "kind": "APIResourceList",
                "resources": [{"name": "jobsets"}, {"name": "jobsets/status"}],
            },
            True,
            id="served",
        ),
        pytest.param(
            {"kind": "APIResourceList", "resources": [{"name": "other"}]},
            False,
            id="other-resource",
        ),
        pytest.param({"kind": "APIResourceList"}, False, id="no-resources"),
        pytest.param(None, False, id="empty"),
    ],
)
def test_jobset_api_in(document: Any, served: bool) -> None:
    assert _core.jobset_api_in(document) is served


def test_decode_body() -> None:
    assert _core.decode_body(b'{"a": 1}') == {"a": 1}
    assert _core.decode_body("") is None
    assert _core.decode_body(None) is None
    assert _core.decode_body(b" \n") is None
    assert _core.decode_body('{"a": "é"}') == {"a": "é"}
    assert _core.decode_body('{"a": "é"}'.encode()) == {"a": "é"}
    # Bytes that are not UTF-8 (a broken proxy): read with the bad sequence replaced.
    assert _core.decode_body(b'{"a": "x\xff"}') == {"a": "x\ufffd"}


# --------------------------------------------------------------------------- errors


def _status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> bytes:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details is not None:
        body["details"] = details
    return json.dumps(body).encode()


INVALID_DETAILS = {
    "name": "bad",
    "group": "jobset.x-k8s.io",
    "kind": "JobSet",
    "causes": [
        {
            "reason": "FieldValueNotSupported",
            "message": 'Unsupported value: "Some"',
            "field": "spec.successPolicy.operator",
        },
        {
            "reason": "FieldValueInvalid",
            "message": "must be no more than 63 characters",
            "field": "metadata.name",
        },
    ],
}


@pytest.mark.parametrize(
    ("status", "reason", "cls"),
    [
        pytest.param(400, "BadRequest", ApiError, id="400-plain-ApiError"),
        pytest.param(401, "Unauthorized", Unauthorized, id="401-Unauthorized"),
        pytest.param(403, "Forbidden", Forbidden, id="403-Forbidden"),
        pytest.param(404, "NotFound", NotFound, id="404-NotFound"),
        pytest.param(409, "AlreadyExists", Conflict, id="409-AlreadyExists"),
        pytest.param(409, "Conflict", Conflict, id="409-Conflict"),
        pytest.param(410, "Expired", Gone, id="410-Gone"),
        pytest.param(422, "Invalid", Invalid, id="422-Invalid"),
        pytest.param(429, "TooManyRequests", TooManyRequests, id="429-TooManyRequests"),
        pytest.param(500, "InternalError", ServerError, id="500-ServerError"),
        pytest.param(503, "ServiceUnavailable", ServerError, id="503-ServerError"),
        pytest.param(504, "Timeout", ServerError, id="504-ServerError"),
    ],
)
def test_status_codes_map_to_our_tree(status: int, reason: str, cls: type[ApiError]) -> None:
    error = error_from_response(status, {}, _status(status, reason, "went wrong", {"name": "x"}))
    assert type(error) is cls
    assert (error.status, error.reason, error.message, error.details) == (
        status,
        reason,
        "went wrong",
        {"name": "x"},
    )


def test_invalid_keeps_the_causes_with_their_field_paths() -> None:
    error = error_from_response(
        422, None, _status(422, "Invalid", "JobSet is invalid", INVALID_DETAILS)
    )
    assert isinstance(error, Invalid)
    assert error.causes == [
        Problem(
            "spec.successPolicy.operator", 'Unsupported value: "Some"', "FieldValueNotSupported"
        ),
        Problem("metadata.name", "must be no more than 63 characters", "FieldValueInvalid"),
    ]


def test_forbidden_names_the_missing_permission() -> None:
    message = (
        'jobsets.jobset.x-k8s.io is forbidden: User "system:serviceaccount:ns:nobody" cannot '
        'create resource "jobsets" in API group "jobset.x-k8s.io" in the namespace "ns"'
    )
    details = {"group": "jobset.x-k8s.io", "kind": "jobsets"}
    error = error_from_response(403, None, _status(403, "Forbidden", message, details))
    assert isinstance(error, Forbidden)
    assert 'cannot create resource "jobsets"' in str(error)
    assert "jobsets.jobset.x-k8s.io" in error.rbac_hint


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(b"upstream connect error", "upstream connect error", id="text"),
        pytest.param(b"", "", id="empty"),
        pytest.param(None, "", id="none"),
        pytest.param("x" * 300, "x" * 255 + "…", id="long-text-truncated-to-256"),
        pytest.param(
            b'{"kind": "Pod", "message": "not a status"}',
            '{"kind": "Pod", "message": "not a status"}',
            id="json-but-not-a-Status",
        ),
    ],
)
def test_non_status_bodies_are_kept_as_truncated_text(body: Any, message: str) -> None:
    error = error_from_response(502, None, body)
    assert isinstance(error, ServerError)
    assert (error.reason, error.message, error.details) == ("BadGateway", message, {})
    assert len(error.message) <= 256


def test_a_status_without_reason_gets_the_http_phrase() -> None:
    error = error_from_response(404, None, b'{"kind": "Status", "message": "gone"}')
    assert (error.reason, error.message) == ("NotFound", "gone")


@pytest.mark.parametrize(
    ("headers", "details", "retry_after"),
    [
        pytest.param({"Retry-After": "3"}, None, 3.0, id="header-seconds"),
        pytest.param({"retry-after": "1.5"}, None, 1.5, id="header-any-case"),
        pytest.param([("Retry-After", "2")], None, 2.0, id="header-pairs"),
        pytest.param(None, {"retryAfterSeconds": 4}, 4.0, id="status-details"),
        pytest.param({"Retry-After": "1"}, {"retryAfterSeconds": 9}, 1.0, id="header-wins"),
        pytest.param(
            {"Retry-After": "Mon, 30 Nov 2026 05:00:10 GMT"}, None, 10.0, id="header-http-date"
        ),
        pytest.param({}, None, None, id="absent"),
    ],
)
def test_retry_after_is_read(headers: Any, details: Any, retry_after: float | None) -> None:
    now = dt.datetime(2026, 11, 30, 5, 0, 0, tzinfo=dt.UTC)
    error = error_from_response(
        429, headers, _status(429, "TooManyRequests", "slow down", details), now=now
    )
    assert isinstance(error, TooManyRequests)
    assert error.retry_after == retry_after


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        pytest.param(None, None, id="none"),
        pytest.param(" ", None, id="blank"),
        pytest.param("-5", 0.0, id="negative-clamped"),
        pytest.param("soon", None, id="garbage"),
        pytest.param("Mon, 30 Nov 2026 04:59:00 GMT", 0.0, id="date-in-the-past"),
    ],
)
def test_parse_retry_after_edge_cases(value: str | None, seconds: float | None) -> None:
    now = dt.datetime(2026, 11, 30, 5, 0, 0, tzinfo=dt.UTC)
    assert parse_retry_after(value, now) == seconds


def test_an_http_date_needs_a_clock() -> None:
    assert parse_retry_after("Mon, 30 Nov 2026 05:00:10 GMT") is None


def test_unreachable_names_the_request() -> None:
    error = _core.unreachable(_core.get(JOB, "ns", "j"), ConnectionRefusedError("refused"))
    assert isinstance(error, Unreachable)
    assert str(error) == (
        "API server unreachable during get jobs.batch /apis/batch/v1/namespaces/ns/jobs/j: refused"
    )


# --------------------------------------------------------------------------- retries

POLICY = RetryPolicy(max_attempts=4, base_delay=1.0, multiplier=2.0, max_delay=5.0, jitter=0.5)
THROTTLED = TooManyRequests(429, "TooManyRequests")
BROKEN = ServerError(503, "ServiceUnavailable")
LOST = Unreachable("connection refused")


@pytest.mark.parametrize(
    ("attempt", "error", "idempotent", "rand", "delay"),
    [
        pytest.param(1, THROTTLED, False, 0.5, 1.0, id="429-first-retry-base"),
        pytest.param(2, THROTTLED, False, 0.5, 2.0, id="429-exponential"),
        pytest.param(3, BROKEN, False, 0.5, 4.0, id="5xx-exponential"),
        pytest.param(3, BROKEN, True, 0.0, 2.0, id="jitter-low-end"),
        pytest.param(3, BROKEN, True, 1.0, 6.0, id="jitter-high-end"),
        pytest.param(4, BROKEN, True, 0.5, None, id="attempts-exhausted"),
        pytest.param(1, LOST, True, 0.5, 1.0, id="lost-read-retried"),
        pytest.param(1, LOST, False, 0.5, None, id="lost-write-not-retried"),
        pytest.param(1, NotFound(404), True, 0.5, None, id="404-not-retried"),
        pytest.param(1, Conflict(409), True, 0.5, None, id="409-not-retried"),
        pytest.param(1, Invalid(422), False, 0.5, None, id="422-not-retried"),
        pytest.param(1, Forbidden(403), True, 0.5, 1.0, id="403-retried-a-little"),
        pytest.param(1, Gone(410), True, 0.5, None, id="410-not-retried"),
        pytest.param(
            1,
            TooManyRequests(429, retry_after=3.0),
            False,
            0.5,
            3.0,
            id="retry-after-longer-than-backoff",
        ),
        pytest.param(
            2,
            TooManyRequests(429, retry_after=0.5),
            False,
            0.5,
            2.0,
            id="retry-after-shorter-than-backoff",
        ),
        pytest.param(
            1, ServerError(503, retry_after=61.0), False, 0.5, None, id="retry-after-beyond-limit"
        ),
    ],
)
def test_retry_delay(
    attempt: int, error: Any, idempotent: bool, rand: float, delay: float | None
) -> None:
    assert retry_delay(POLICY, attempt, error, idempotent=idempotent, rand=rand) == delay


@pytest.mark.parametrize(
    ("may_pass", "attempt", "delay"),
    [
        pytest.param(False, 1, 1.0, id="retried-a-little"),
        pytest.param(False, 3, 4.0, id="a-few-seconds"),
        pytest.param(False, 4, None, id="never-allowed-surfaces-then"),
        pytest.param(True, 4, 8.0, id="allowed-before-or-restart-retried-longer"),
        pytest.param(True, 6, None, id="but-it-lasts"),
    ],
)
def test_a_403_that_may_be_a_restarts_is_retried_for_a_while(
    may_pass: bool, attempt: int, delay: float | None
) -> None:
    """A restarted API server refuses everything until its RBAC caches are filled."""
    policy = RetryPolicy(max_attempts=6, base_delay=1.0, max_delay=10.0, jitter=0.5)
    got = retry_delay(
        policy, attempt, Forbidden(403), idempotent=True, rand=0.5, forbidden_may_pass=may_pass
    )
    assert got == delay


def test_a_dry_runs_403_surfaces_at_once_unless_it_may_be_a_restarts() -> None:
    """A server check's probe the identity may not create is left unchecked: every submit
    would otherwise wait for the retries."""
    policy = RetryPolicy(max_attempts=6, base_delay=1.0, max_delay=10.0, jitter=0.5)
    once = {"idempotent": True, "rand": 0.5, "forbidden_attempts": 1}
    assert retry_delay(policy, 1, Forbidden(403), **once) is None  # type: ignore[arg-type]
    allowed = retry_delay(policy, 1, Forbidden(403), forbidden_may_pass=True, **once)  # type: ignore[arg-type]
    assert allowed == 1.0
    request = _core.create(JOB, "ns", {"metadata": {"name": "j"}}, dry_run=True)
    assert request.dry_run and not _core.create(JOB, "ns", {"metadata": {"name": "j"}}).dry_run


#: What the API server says, word for word (authorizer; ResourceQuota and Pod Security
#: admission).
RBAC_403 = (
    'jobs.batch is forbidden: User "system:serviceaccount:ns:w" cannot create resource "jobs" '
    'in API group "batch" in the namespace "ns"'
)
QUOTA_403 = (
    'jobs.batch "run-w-0" is forbidden: exceeded quota: parity, requested: count/jobs.batch=1, '
    "used: count/jobs.batch=0, limited: count/jobs.batch=0"
)
PSA_403 = (
    'pods "p" is forbidden: violates PodSecurity "restricted:latest": privileged '
    '(container "c" must not set securityContext.privileged=true)'
)


@pytest.mark.parametrize(
    ("message", "admission", "retried"),
    [
        pytest.param(RBAC_403, False, True, id="rbac-may-be-a-restarts"),
        pytest.param("", False, True, id="no-message-as-before"),
        pytest.param(QUOTA_403, True, False, id="quota-never"),
        pytest.param(PSA_403, True, False, id="pod-security-never"),
    ],
)
@pytest.mark.parametrize("may_pass", [False, True])
def test_an_admission_refusal_is_never_retried_and_names_no_role(
    message: str, admission: bool, retried: bool, may_pass: bool
) -> None:
    """A quota's 403 is the same on every attempt, and no Role grants it: retrying it only
    delayed the verdict (3.5 s, 25 s when the call was allowed before)."""
    error = Forbidden(403, "Forbidden", message)
    assert error.by_admission is admission
    got = retry_delay(POLICY, 1, error, idempotent=True, rand=0.5, forbidden_may_pass=may_pass)
    assert (got is not None) is retried
    assert ("Role/RoleBinding" in str(error)) is not admission


@pytest.mark.parametrize(
    ("path", "permission"),
    [
        pytest.param("/api/v1/namespaces/ns/pods", ("list", "pods", "ns"), id="namespaced"),
        pytest.param("/api/v1/pods", ("list", "pods", ""), id="cluster-wide"),
        pytest.param("/apis/batch/v1/namespaces/ns/jobs/j", ("list", "pods", "ns"), id="named"),
    ],
)
def test_the_permission_a_request_needs(path: str, permission: tuple[str, str, str]) -> None:
    assert Request("GET", path, verb="list", resource="pods").permission == permission


def test_backoff_is_capped() -> None:
    policy = RetryPolicy(max_attempts=50, base_delay=1.0, max_delay=5.0, jitter=0.0)
    delays = [retry_delay(policy, n, BROKEN, idempotent=True, rand=0.3) for n in range(1, 8)]
    assert delays == [1.0, 2.0, 4.0, 5.0, 5.0, 5.0, 5.0]


def test_one_attempt_means_no_retry() -> None:
    assert retry_delay(RetryPolicy(max_attempts=1), 1, BROKEN, idempotent=True, rand=0.5) is None


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({"max_attempts": 0}, id="no-attempts"),
        pytest.param({"jitter": 1.5}, id="jitter"),
    ],
)
def test_retry_policy_is_validated(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="must be"):
        RetryPolicy(**kwargs)


def test_package_exports_are_exact_and_sorted() -> None:
    import jobset_core.client as package

    assert package.__all__ == sorted(package.__all__)
    assert all(hasattr(package, name) for name in package.__all__)
    assert {"Client", "ClientSettings", "ClientStats", "WatchEvent"} <= set(package.__all__)
    assert len(set(_core.__all__)) == len(_core.__all__)
    assert all(hasattr(_core, name) for name in _core.__all__)
