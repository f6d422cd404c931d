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
