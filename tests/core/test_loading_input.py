"""What the loader refuses before anything else runs: duplicate keys, too many documents, an
object larger than the API server reads (``jobset_core.models``, issue 21).

The cluster-marked tests at the end show the server facts these rely on, with server-side dry
runs against the devcluster: strict decoding refuses a duplicate field, and a request body of
3 MiB is read while one byte more is answered 413.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jobset_core import cli
from jobset_core.errors import SpecError
from jobset_core.models import _input, load_jobset, load_jobsets, load_yaml_documents
from jobset_core.models.loading import MAX_OBJECT_BYTES, object_size_problem
from tests.core.test_limits import run

HEAD = "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\n"
BODY = """metadata:
  name: js
spec:
  replicatedJobs:
  - name: w
    template:
      spec:
        completions: 1
        parallelism: 1
        template:
          spec:
            restartPolicy: Never
            containers:
            - name: main
              image: busybox
"""
GOOD = HEAD + BODY


def problems_of(text: str, label: str | None = None) -> list[tuple[str, str, str]]:
    with pytest.raises(SpecError) as err:
        load_jobsets(text)
    assert err.value.source == label
    return [(p.path, p.rule, p.message) for p in err.value.problems]


# -- duplicate keys ---------------------------------------------------------------------------

DUPLICATES = [
    pytest.param(HEAD + "kind: JobSet\n" + BODY, [("kind", 3, 2)], id="kind-twice"),
    pytest.param(
        GOOD.replace("  name: js\n", "  name: js\n  name: other\n"),
        [("metadata.name", 5, 4)],
        id="name-twice-in-metadata",
    ),
    pytest.param(
        GOOD.replace("image: busybox\n", "image: busybox\n              image: alpine\n"),
        [("spec.replicatedJobs[0].template.spec.template.spec.containers[0].image", 18, 17)],
        id="deep-in-a-container",
    ),
    pytest.param(
        GOOD.replace("kind: JobSet\n", 'kind: JobSet\n"kind": JobSet\n'),
        [("kind", 3, 2)],
        id="quoted-and-plain-are-one-key",
    ),
    pytest.param(
        GOOD.replace("completions: 1\n", "completions: 1\n        completions: 2\n"),
        [("spec.replicatedJobs[0].template.spec.completions", 11, 10)],
        id="different-values",
    ),
    pytest.param(
        GOOD.replace("  name: js\n", "  name: js\n  labels: {a: '1', b: '2', a: '3'}\n"),
        [("metadata.labels.a", 5, 5)],
        id="flow-mapping",
    ),
    pytest.param(
        GOOD.replace("kind: JobSet\n", "kind: JobSet\nkind: JobSet\nkind: JobSet\n"),
        [("kind", 3, 2), ("kind", 4, 2)],
        id="every-repetition",
    ),
]


@pytest.mark.parametrize(("text", "expected"), DUPLICATES)
def test_a_duplicate_key_is_refused_with_its_line(
    text: str, expected: list[tuple[str, int, int]]
) -> None:
    found = problems_of(text)
    assert [(path, rule) for path, rule, _ in found] == [
        (path, "yaml-duplicate-key") for path, _, _ in expected
    ]
    for (_, _, message), (path, line, first) in zip(found, expected, strict=True):
        key = path.rsplit(".", 1)[-1]
        assert message.startswith(f"duplicate key {key!r} at line {line}, column "), message
        assert f"(first at line {first}, column " in message
        assert "strict decoding refuses duplicate fields" in message


def test_a_duplicate_key_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text(HEAD + "kind: JobSet\n" + BODY)
    found = problems_of(str(path), label=str(path))
    assert [(p, r) for p, r, _ in found] == [("kind", "yaml-duplicate-key")]
    code, out, err = run("validate", str(path))
    assert (code, err) == (cli.EXIT_INVALID, "")
    assert out.startswith(f"{path}: kind: duplicate key 'kind' at line 3, column 1 ")
    assert out.count("\n") == 1  # nothing else ran


def test_the_document_of_a_duplicate_key_is_named_in_a_multi_document_file() -> None:
    dup = GOOD.replace("  name: js\n", "  name: js\n  name: js2\n")
    found = problems_of(GOOD + "---\n" + dup + "---\n" + dup)
    assert [(p, r) for p, r, _ in found] == [
        ("<document 1>.metadata.name", "yaml-duplicate-key"),
        ("<document 2>.metadata.name", "yaml-duplicate-key"),
    ]
    assert "at line 23, column 3 (first at line 22, column 3)" in found[0][2]
    # The first document too, once the file holds several (empty documents are not counted).
    found = problems_of("---\n---\n" + dup + "---\n" + GOOD)
    assert [p for p, _, _ in found] == ["<document 0>.metadata.name"]


def test_json_input_is_held_to_the_same_rule() -> None:
    data = json.loads(json.dumps(load_jobset(GOOD).to_dict()))
    text = json.dumps(data, indent=1).replace('"kind": "JobSet"', '"kind": "JobSet", "kind": "X"')
    found = problems_of(text)
    assert [(p, r) for p, r, _ in found] == [("kind", "yaml-duplicate-key")]
    assert "at line 3, column 20 (first at line 3, column 2)" in found[0][2]


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("a: {x: 1}\nb: [{y: 1}, {y: 2}]\nc: {x: 1}\n", id="same-key-elsewhere"),
        pytest.param("base: &b {x: 1, y: 2}\nmerged: {<<: *b, x: 3}\n", id="merge-overridden"),
        pytest.param("a: {1: x, '1': y}\n", id="int-and-string-keys"),
    ],
)
def test_what_is_not_a_duplicate(text: str) -> None:
    assert load_yaml_documents(text, None)


def test_equal_keys_after_construction_are_duplicates() -> None:
    # 1 and 0x1 are one key once read (PyYAML would keep the last silently).
    with pytest.raises(SpecError) as err:
        load_yaml_documents("a: {1: x, 0x1: y}\n", "f.yaml")
    assert [(p.path, p.rule) for p in err.value.problems] == [("a.0x1", "yaml-duplicate-key")]


def test_the_pure_python_parser_finds_the_same_duplicates(monkeypatch: pytest.MonkeyPatch) -> None:
    text = GOOD.replace("  name: js\n", "  name: js\n  name: js2\n")
    fast = problems_of(text)
    monkeypatch.setattr(_input, "_CParser", None)
    assert problems_of(text) == fast


# -- documents per file -----------------------------------------------------------------------


def test_more_documents_than_the_bound_are_refused_with_the_reason() -> None:
    text = "---\na: 1\n" * (_input.MAX_DOCUMENTS + 1)
    with pytest.raises(SpecError) as err:
        load_yaml_documents(text, "many.yaml")
    (problem,) = err.value.problems
    assert (err.value.source, problem.path, problem.rule) == ("many.yaml", "", "too-many-documents")
    assert problem.message.startswith(
        f"more than {_input.MAX_DOCUMENTS} JobSet documents in one file (a bound of this tool, "
        "not of Kubernetes"
    )
    assert f"the next one starts at line {2 * _input.MAX_DOCUMENTS + 1}, column 1" in (
        problem.message
    )
    assert len(load_yaml_documents("---\na: 1\n" * _input.MAX_DOCUMENTS, None)) == (
        _input.MAX_DOCUMENTS
    )


def test_the_document_bound_is_far_above_a_real_file() -> None:
    assert _input.MAX_DOCUMENTS >= 10_000


def test_empty_documents_do_not_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_input, "MAX_DOCUMENTS", 2)
    assert len(load_yaml_documents("---\n---\na: 1\n---\n---\nb: 1\n---\n", None)) == 2
    with pytest.raises(SpecError):
        load_yaml_documents("a: 1\n---\nb: 1\n---\nc: 1\n", None)


# -- one object larger than the API server reads ----------------------------------------------


def padded(size: int) -> dict[str, Any]:
    """The GOOD JobSet, padded with container args to exactly ``size`` bytes of compact JSON."""
    data = load_jobset(GOOD).to_dict()
    pod = data["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["containers"][0]["args"] = [""]
    base = len(json.dumps(data, separators=(",", ":")).encode())
    pod["containers"][0]["args"] = ["x" * (size - base)]
    assert len(json.dumps(data, separators=(",", ":")).encode()) == size
    return data


def test_an_object_of_3_mib_is_read_and_one_byte_more_refused() -> None:
    assert object_size_problem(padded(MAX_OBJECT_BYTES), ()) is None
    assert load_jobset(padded(MAX_OBJECT_BYTES))
    with pytest.raises(SpecError) as err:
        load_jobset(padded(MAX_OBJECT_BYTES + 1))
    (problem,) = err.value.problems
    assert (problem.path, problem.rule) == ("", "object-size")
    assert problem.message.startswith(
        f"{MAX_OBJECT_BYTES + 1} bytes as JSON: larger than the 3145728 bytes (3 MiB) the API "
        "server reads in one request (it answers 413 Request Entity Too Large)"
    )


def test_the_size_is_a_lower_bound_of_any_json_body() -> None:
    # Non-ASCII text counts its UTF-8 bytes (no \\u escapes); 1.0 counts as Go writes it: 1.
    data = padded(MAX_OBJECT_BYTES + 1)
    data["metadata"]["labels"] = {"a": "é"}
    pod = data["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["terminationGracePeriodSeconds"] = 1.0
    added = len(',"labels":{"a":"é"}'.encode()) + len(',"terminationGracePeriodSeconds":1')
    problem = object_size_problem(data, ("<document 3>",))
    assert problem is not None
    assert problem.path == "<document 3>"
    assert problem.message.startswith(f"{MAX_OBJECT_BYTES + 1 + added} bytes as JSON")


def test_a_file_names_the_document_that_is_too_large(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    # JSON is YAML: one stream of two documents, the second too large.
    path.write_text(json.dumps(padded(1000)) + "\n---\n" + json.dumps(padded(MAX_OBJECT_BYTES + 9)))
    with pytest.raises(SpecError) as err:
        load_jobsets(path)
    assert err.value.source == str(path)
    assert [(p.path, p.rule) for p in err.value.problems] == [("<document 1>", "object-size")]


# -- the same facts on the devcluster (server-side dry run) -----------------------------------


def _post(devcluster: Any, namespace: str, body: bytes, content_type: str) -> tuple[int, str]:
    """A raw dry-run create of a JobSet (the generated client would re-encode the body)."""
    api = devcluster.api_client()
    url = (
        f"{api.configuration.host}/apis/jobset.x-k8s.io/v1alpha2/namespaces/{namespace}/jobsets"
        "?dryRun=All&fieldValidation=Strict"
    )
    headers = {"Content-Type": content_type, "Accept": "application/json"}
    headers.update(
        {k: v for k, v in api.configuration.api_key.items() if k.lower() == "authorization"}
    )
    answer = api.rest_client.pool_manager.request(
        "POST", url, body=body, headers=headers, timeout=60
    )
    return answer.status, answer.data.decode("utf-8", "replace")


@pytest.mark.cluster
@pytest.mark.parametrize(
    ("body", "content_type", "says"),
    [
        pytest.param(
            json.dumps(load_jobset(GOOD).to_dict()).replace(
                '"kind": "JobSet"', '"kind": "JobSet", "kind": "JobSet"'
            ),
            "application/json",
            'strict decoding error: duplicate field \\"kind\\"',
            id="json",
        ),
        pytest.param(
            GOOD.replace("  name: js\n", "  name: js\n  name: js\n"),
            "application/yaml",
            'key \\"name\\" already set in map',
            id="yaml",
        ),
    ],
)
def test_the_server_refuses_a_duplicate_field(
    body: str, content_type: str, says: str, devcluster: Any, cluster_namespace: str
) -> None:
    """Strict decoding refuses duplicate fields, even with the same value twice."""
    status, answer = _post(devcluster, cluster_namespace, body.encode(), content_type)
    assert (status, says in answer) == (400, True), answer
    with pytest.raises(SpecError):
        load_jobsets(body)


@pytest.mark.cluster
def test_the_server_reads_3_mib_and_refuses_one_byte_more(
    devcluster: Any, cluster_namespace: str
) -> None:
    """``MaxRequestBodyBytes``: the dry run of a 3 MiB body passes, one byte more is a 413."""
    for size, accepted in ((MAX_OBJECT_BYTES, True), (MAX_OBJECT_BYTES + 1, False)):
        data = padded(size)
        body = json.dumps(data, separators=(",", ":")).encode()
        status, answer = _post(devcluster, cluster_namespace, body, "application/json")
        assert (status == 201) == accepted, (size, status, answer[:300])
        if not accepted:
            assert status == 413 and "Request entity too large" in answer, answer[:300]
        assert (object_size_problem(data, ()) is None) == accepted
