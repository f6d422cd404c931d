"""The Job-template schema tables are cached per client version, so a process that validates
does not import the official client's ~700 models again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jobset_core.validation import _k8s_schema
from tests._fresh import ROOT, fresh_python

EXAMPLE = ROOT / "examples" / "jobsets" / "hello.yaml"

# Validate a file and say whether the official client was imported to do it.
PROBE = """
import json, sys
from jobset_core.models import load_jobset
from jobset_core.validation import validate
problems = validate(load_jobset(sys.argv[1]))
print(json.dumps({"problems": [str(p) for p in problems],
                  "client": "kubernetes.client" in sys.modules}))
"""


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    _k8s_schema.schema_tables.cache_clear()
    yield tmp_path
    _k8s_schema.schema_tables.cache_clear()


def _probe(path: Path, cache_home: Path) -> dict[str, object]:
    return json.loads(fresh_python(PROBE, str(path), cache_home=cache_home).stdout)


def test_the_cached_tables_are_the_clients(cache_home: Path) -> None:
    assert not _k8s_schema.cache_file().exists()
    first = _k8s_schema.schema_tables()
    assert _k8s_schema.cache_file().is_file()
    _k8s_schema.schema_tables.cache_clear()
    again = _k8s_schema.schema_tables()  # read back from the file
    assert again == first == _k8s_schema.read_client_tables()
    assert {"V1JobSpec", "V1PodSpec", "V1Container"} <= set(again)


def test_a_later_process_validates_without_importing_the_client(cache_home: Path) -> None:
    cold = _probe(EXAMPLE, cache_home)
    assert cold["client"] is True
    warm = _probe(EXAMPLE, cache_home)
    assert warm == {"problems": cold["problems"], "client": False}


def test_a_bad_template_is_found_from_the_cache_too(cache_home: Path, tmp_path: Path) -> None:
    import yaml

    doc = yaml.safe_load(EXAMPLE.read_text())
    spec = doc["spec"]["replicatedJobs"][0]["template"]["spec"]
    spec["template"]["spec"]["containers"][0]["imagePullPolicy2"] = "x"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(doc))
    cold, warm = _probe(bad, cache_home), _probe(bad, cache_home)
    assert warm["client"] is False
    assert warm["problems"] == cold["problems"]
    assert any("imagePullPolicy2" in p for p in warm["problems"])  # type: ignore[union-attr]


def test_a_cache_that_cannot_be_written_or_read_is_no_error(
    cache_home: Path, unwritable_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _k8s_schema.schema_tables() == _k8s_schema.read_client_tables()
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache_home))
    _k8s_schema.schema_tables.cache_clear()
    _k8s_schema.cache_file().parent.mkdir(parents=True)
    _k8s_schema.cache_file().write_text("{broken")
    assert _k8s_schema.schema_tables() == _k8s_schema.read_client_tables()


def test_the_tables_hold_what_the_roots_reach_and_nothing_else(cache_home: Path) -> None:
    tables = _k8s_schema.schema_tables()
    assert set(_k8s_schema.ROOTS) <= set(tables)
    named = {
        _k8s_schema._named(field.type) for fields in tables.values() for field in fields.values()
    }
    # Closed: every class a field names is in the tables, so the walker never misses one.
    assert {n for n in named if _k8s_schema._is_model(n)} <= set(tables)
    assert "V1Service" not in tables  # not under a Job template or a volume claim template


F = _k8s_schema._Field


@pytest.mark.parametrize(
    ("tables", "roots", "expected"),
    [
        ({"A": {}, "B": {}}, ("A",), ["A"]),
        ({"A": {"b": F("b", "B", False)}, "B": {}, "C": {}}, ("A",), ["A", "B"]),
        ({"A": {"b": F("b", "list[B]", False)}, "B": {}}, ("A",), ["A", "B"]),
        ({"A": {"b": F("b", "dict[str, list[B]]", False)}, "B": {}}, ("A",), ["A", "B"]),
        ({"A": {"b": F("b", "dict(str, B)", False)}, "B": {}}, ("A",), ["A", "B"]),
        ({"A": {"a": F("a", "A", False), "s": F("s", "str", True)}}, ("A",), ["A"]),
        ({"A": {"b": F("b", "B", False)}, "B": {"a": F("a", "A", False)}}, ("B",), ["B", "A"]),
        ({"A": {}}, ("Missing", "A"), ["A"]),
    ],
)
def test_reached_follows_fields_through_lists_and_maps(
    tables: dict[str, dict[str, _k8s_schema._Field]], roots: tuple[str, ...], expected: list[str]
) -> None:
    assert list(_k8s_schema.reached(tables, roots)) == expected
