"""What ``jobsetctl validate`` imports at start, once a first run filled the file cache: no
Kubernetes client (the schema tables come from the cache), no asyncio, no cluster layer.
Structural, not timed: the start's time is ``make bench``'s ``local`` figure."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests._fresh import fresh_python

EXAMPLE = "examples/jobsets/hello.yaml"

PROBE = """
import json, sys
from jobset_core.cli import main
code = main(["validate", sys.argv[1]])
tops = {m.split(".")[0] for m in sys.modules}
print(json.dumps({"code": code, "tops": sorted(tops), "modules": sorted(sys.modules)}))
"""

#: What ``validate`` never needs once the schema tables are cached.
CLIENTS = ("kubernetes", "kubernetes_asyncio", "aiohttp", "urllib3", "asyncio", "airflow", "kfp")
LAYERS = (
    "jobset_core.lifecycle",
    "jobset_core.client",
    "jobset_core.observe",
    "jobset_core.backends",
)


def _validate(cache: Path) -> dict[str, Any]:
    done = fresh_python(PROBE, EXAMPLE, cache_home=cache)
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_validate_after_a_first_run_imports_no_client_and_no_cluster_layer(
    tmp_path: Path,
) -> None:
    first = _validate(tmp_path)  # may read the installed client once, for the schema tables
    assert first["code"] == 0
    assert list((tmp_path / "jobset-core").glob("k8s-schema-*.json"))
    again = _validate(tmp_path)
    assert again["code"] == 0
    tops = set(again["tops"])
    assert tops.isdisjoint(CLIENTS), sorted(tops & set(CLIENTS))
    loaded = [m for m in again["modules"] if m.startswith(LAYERS)]
    assert loaded == []
