"""What a JobSetOperator reads at DAG parse (its ``retries``) is read once per text: the next
parse, in a fresh process as a DAG processor runs it, reads the answer from the file cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_jobset import _parse_time
from airflow_provider_jobset._parse_time import restarts_at_parse
from jobset_core.models import load_jobset
from tests._fresh import fresh_python
from tests.airflow.test_arguments import YAML


def text(policy: str = "failurePolicy: {maxRestarts: 3}") -> str:
    return YAML.format(restarts=0).replace("failurePolicy: {maxRestarts: 0}", policy)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "jobset-core" / "parse-time"


def entries(home: Path) -> list[Path]:
    return sorted(home.iterdir()) if home.exists() else []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (text(), 3),
        (text("failurePolicy: {maxRestarts: 0}"), 0),
        (text("successPolicy: {operator: All}"), 0),  # no failure policy: no restart
        (
            text(
                "failurePolicy: {maxRestarts: 2, "
                "rules: [{action: RestartJobSetAndIgnoreMaxRestarts}]}"
            ),
            None,
        ),
        (text().replace("kind: JobSet", "kind: JobSet\nkind: JobSet"), None),  # bad input
        ("not: [yaml", None),
    ],
)
def test_the_answer_is_the_jobsets_and_the_same_from_the_cache(
    home: Path, source: str, expected: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert restarts_at_parse(source) == expected
    assert len(entries(home)) == ("\n" in source)

    def no_read(*_: object) -> None:
        raise AssertionError("read again")

    monkeypatch.setattr(_parse_time, "load_jobset", no_read)
    assert restarts_at_parse(source) == expected


@pytest.mark.parametrize(
    "source",
    [
        "jobset.yaml",
        text().replace("busybox", "{{ params.image }}"),
        text().replace("c,", "{% x %}"),
    ],
)
def test_templates_and_paths_are_not_read_nor_kept(home: Path, source: str) -> None:
    assert restarts_at_parse(source) is None
    assert entries(home) == []


def test_jobsets_and_python_data_are_read_as_they_are(home: Path) -> None:
    jobset = load_jobset(text())
    assert restarts_at_parse(jobset) == 3
    assert restarts_at_parse(jobset.to_dict()) == 3
    assert entries(home) == []


def test_a_damaged_entry_is_read_again(home: Path) -> None:
    assert restarts_at_parse(text()) == 3
    (entry,) = entries(home)
    for damage in ('{"restarts": "3"}', "[]", "{"):
        entry.write_text(damage)
        assert restarts_at_parse(text()) == 3
    assert entry.read_text() == '{"restarts": 3}'


def test_the_folder_keeps_at_most_its_bound(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_parse_time, "ENTRIES", 6)
    for i in range(20):
        assert restarts_at_parse(text(f"failurePolicy: {{maxRestarts: {i}}}")) == i
    assert 0 < len(entries(home)) <= 6


@pytest.mark.usefixtures("unwritable_cache")
def test_a_home_that_cannot_be_written_still_gets_the_answer() -> None:
    assert restarts_at_parse(text()) == 3
    assert restarts_at_parse(text()) == 3


PROBE = """
import sys
from jobset_core.models import loading
composed = []
original = loading.load_yaml_documents
loading.load_yaml_documents = lambda *a: composed.append(1) or original(*a)
from airflow_provider_jobset.operators import JobSetOperator
op = JobSetOperator(task_id="t", jobset=open(sys.argv[1]).read())
print(op.retries, len(composed))
"""


def test_the_next_parse_in_a_fresh_process_reads_no_yaml(home: Path, tmp_path: Path) -> None:
    source = tmp_path / "jobset.yaml"
    source.write_text(text())

    def parse() -> str:
        done = fresh_python(PROBE, str(source), cache_home=home.parent.parent)
        return done.stdout.split("\n")[-2]

    assert parse() == "3 1"  # the first parse reads the text
    assert parse() == "3 0"  # the next reads the answer
