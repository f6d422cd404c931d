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


SCRIPT_PROBE = """
import json, os, sys
os.environ.pop("PYDANTIC_DISABLE_PLUGINS", None)
import gc
from jobset_core import cli
sys.argv = ["jobsetctl", "validate", sys.argv[1]]
before = gc.get_freeze_count()  # not 0 at start on every Python (3.12: 375)
code = cli.{call}
import pydantic, pydantic.plugin._loader as loader
print(json.dumps({{
    "code": code,
    "scanned": loader._plugins is not None,
    "env": os.environ.get("PYDANTIC_DISABLE_PLUGINS"),
    "pydantic": pydantic.VERSION,
    "collecting": gc.isenabled(),
    "frozen": gc.get_freeze_count() > before,
}}))
"""


def test_the_console_script_does_not_scan_for_pydantic_plugins_and_main_changes_no_env(
    tmp_path: Path,
) -> None:
    # jobsetctl (the console script) is a process of its own: the scan of every installed
    # distribution's entry points for pydantic plugins is skipped, and the start collects
    # no cyclic garbage and leaves its objects frozen for the exit; main(), called by a
    # program, leaves that program's environment, pydantic and collector alone.
    runs = {}
    for call in ("script()", "main(sys.argv[1:])"):
        done = fresh_python(SCRIPT_PROBE.format(call=call), EXAMPLE, cache_home=tmp_path)
        runs[call] = json.loads(done.stdout.strip().splitlines()[-1])
    # pydantic reads the variable from 2.7 on (the KFP side's environment has 2.6: it scans).
    major, minor = (int(part) for part in runs["script()"].pop("pydantic").split(".")[:2])
    honoured = (major, minor) >= (2, 7)
    assert runs["script()"] == {
        "code": 0,
        "scanned": not honoured,
        "env": "__all__",
        "collecting": False,
        "frozen": True,
    }
    runs["main(sys.argv[1:])"].pop("pydantic")
    assert runs["main(sys.argv[1:])"] == {
        "code": 0,
        "scanned": True,
        "env": None,
        "collecting": True,
        "frozen": False,
    }


def test_importing_the_package_or_its_cli_imports_no_model() -> None:
    # Every public name of jobset_core is imported on first use: the CLI's start decides
    # what it needs (validate: the models; --help: nothing).
    probe = (
        "import json, sys, jobset_core, jobset_core.cli; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('pydantic', 'yaml')))))"
    )
    done = fresh_python(probe)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
    again = fresh_python(
        "import jobset_core; from jobset_core import JobSet, validate, Handle; "
        "print(JobSet.__module__, validate.__module__, Handle.__module__, "
        "sorted(set(dir(jobset_core)) ^ set(jobset_core.__all__)))"
    )
    assert again.stdout.split() == [
        "jobset_core.models.jobset",
        "jobset_core.validation",
        "jobset_core.backends._base",
        "[]",
    ]
