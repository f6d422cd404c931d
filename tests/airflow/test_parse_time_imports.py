"""A DAG parse in a fresh process (as Airflow 3's DAG processor runs one), of a file whose
JobSet text an earlier parse read: building the operator loads no YAML, validates no JobSet
model and imports no Kubernetes client. Structural, not timed: the parse's cost is
``make bench``'s ``local`` figure."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests._fresh import fresh_python
from tests.airflow.test_arguments import YAML

PROBE = """
import json, sys
from airflow.sdk import BaseOperator
BaseOperator(task_id="any")  # what any operator of a DAG file costs is Airflow's, not ours
airflows = {m.split(".")[0] for m in sys.modules}  # (3.0's imports aiohttp, through its API)
from jobset_core.models import JobSet
from airflow_provider_jobset import _parse_time
read = []
loader = _parse_time.load_jobset
_parse_time.load_jobset = lambda *a, **k: read.append("load") or loader(*a, **k)
validate = JobSet.model_validate
JobSet.model_validate = classmethod(
    lambda cls, *a, **k: read.append("model") or validate.__func__(cls, *a, **k)
)
from airflow_provider_jobset.operators import JobSetOperator
op = JobSetOperator(task_id="t", jobset=open(sys.argv[1]).read())
tops = sorted({m.split(".")[0] for m in sys.modules} - airflows)
client = [m for m in sys.modules if m.startswith("jobset_core.client._client")]
print(json.dumps({"retries": op.retries, "read": read, "tops": tops, "client": client}))
"""

CLIENTS = ("kubernetes", "kubernetes_asyncio", "aiohttp", "urllib3")


def _parse(source: Path, cache: Path) -> dict[str, Any]:
    done = fresh_python(PROBE, str(source), cache_home=cache)
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_a_parse_of_an_unchanged_file_reads_nothing_and_imports_no_client(
    tmp_path: Path,
) -> None:
    source = tmp_path / "jobset.yaml"
    source.write_text(YAML.format(restarts=2))
    cache = tmp_path / "cache"
    first = _parse(source, cache)
    assert first["retries"] == 2
    assert "load" in first["read"]
    again = _parse(source, cache)
    assert (again["retries"], again["read"], again["client"]) == (2, [], [])
    tops = set(again["tops"])
    assert tops.isdisjoint(CLIENTS), sorted(tops & set(CLIENTS))
