"""In-process costs, measured in a fresh interpreter (``python -m benchmarks.inproc <spec>``).

``import``      CPU time and RSS that importing a module adds over ``airflow.sdk`` (what a
                DAG file pays to import an operator): ours ``airflow_provider_jobset.operators``,
                the anchor ``airflow.providers.cncf.kubernetes.operators.job``.
``validation``  one JobSet checked in-process (load + validate, as ``jobsetctl validate``
                does) against a server-side dry run of it (the API server's and the JobSet
                webhook's checks, a round trip), and ``yaml.safe_load`` of its text (the floor).
``dagparse``    an operator built in a DAG file from a YAML text, parsed before (as a DAG
                processor parses an unchanged file every 30 s): ``JobSetOperator`` reads
                its retries at construction (from the file cache after the first parse of
                the text), ``KubernetesJobOperator`` is given a ``job_template_file``; the
                floor is ``yaml.safe_load`` of the same text. Also the first parse of a new
                text, and what an alias bomb costs our parse-time read (refused early).
``dagparse_fresh``  the first operator a fresh interpreter builds (``subject``: ours or the
                anchor) from the ``dagparse`` text, which an earlier process parsed: a DAG
                processor parses each file in a process of its own, so this is what a parse
                of an unchanged file pays per file beyond its imports (timed apart: the
                ``import`` figures).

Prints one JSON object.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
import timeit
from collections.abc import Callable
from typing import Any

__all__ = ["main"]


def _rss() -> int:
    with open("/proc/self/statm", encoding="ascii") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measure_import(module: str) -> dict[str, float]:
    """What importing ``module`` adds over ``airflow.sdk`` (CPU seconds, wall, RSS bytes)."""
    importlib.import_module("airflow.sdk")
    cpu, wall, rss = time.process_time(), time.perf_counter(), _rss()
    importlib.import_module(module)
    return {
        "cpu": time.process_time() - cpu,
        "wall": time.perf_counter() - wall,
        "rss": float(_rss() - rss),
    }


def _loop(call: Callable[[], Any], seconds: float) -> list[float]:
    """Call repeatedly for about ``seconds``; each call's duration (seconds)."""
    took: list[float] = []
    ends = time.perf_counter() + seconds
    while time.perf_counter() < ends or len(took) < 3:
        started = time.perf_counter()
        call()
        took.append(time.perf_counter() - started)
    return took


def _jobset_text() -> str:
    from jobset_core import dump_yaml, pytorch_ddp

    jobset = pytorch_ddp(
        "ddp", "torch", ["train.py"], nodes=4, procs_per_node=8, gpus_per_node=8, max_restarts=3
    )
    return dump_yaml(jobset)


def measure_validation(spec: dict[str, Any]) -> dict[str, Any]:
    import yaml
    from kubernetes import client, config

    from jobset_core import load_jobset
    from jobset_core.validation import validate

    text = _jobset_text()
    body = yaml.safe_load(text)
    seconds = float(spec["seconds"])

    def ours() -> None:
        if validate(load_jobset(text)):
            raise AssertionError("the benchmark's JobSet is invalid")

    api = config.new_client_from_config(config_file=spec["kubeconfig"])
    custom = client.CustomObjectsApi(api)
    namespace = spec["namespace"]

    def server() -> None:
        custom.create_namespaced_custom_object(
            "jobset.x-k8s.io", "v1alpha2", namespace, "jobsets", body, dry_run="All"
        )

    ours()
    server()  # the first of each pays for imports and the connection
    return {
        "bytes": len(text),
        "ours": _loop(ours, seconds),
        "server": _loop(server, seconds),
        "yaml": _loop(lambda: yaml.safe_load(text), seconds),
    }


def _best(call: Callable[[], Any], number: int) -> float:
    return min(timeit.repeat(call, number=number, repeat=5)) / number


def measure_dagparse(spec: dict[str, Any]) -> dict[str, Any]:
    import yaml
    from airflow.providers.cncf.kubernetes.operators.job import KubernetesJobOperator

    from airflow_provider_jobset import _parse_time
    from airflow_provider_jobset.operators import JobSetOperator

    # The parse-time answers go to a cache of this run's own (a DAG processor's is its home's).
    os.environ["XDG_CACHE_HOME"] = os.path.join(spec["work"], "cache")
    text = _jobset_text()
    path = os.path.join(spec["work"], "job.yaml")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for level, previous in zip("bcdefghij", "abcdefghi", strict=True):
        lines.append(f"{level}: &{level} [{', '.join(['*' + previous] * 9)}]")
    bomb = "\n".join(lines) + "\n"
    number = int(spec.get("number", 50))
    counter = iter(range(10**9))

    def new_text() -> str:  # a text never parsed before: the first parse of an edited file
        return f"{text}# {next(counter)}\n"

    JobSetOperator(task_id="warm", jobset=text)  # the first parse of this text
    return {
        "bytes": len(text),
        "ours": _best(lambda: JobSetOperator(task_id=f"t{next(counter)}", jobset=text), number),
        "ours_first": _best(
            lambda: JobSetOperator(task_id=f"t{next(counter)}", jobset=new_text()), number
        ),
        "anchor": _best(
            lambda: KubernetesJobOperator(task_id=f"k{next(counter)}", job_template_file=path),
            number,
        ),
        "yaml": _best(lambda: yaml.safe_load(text), number),
        "parse_time_read": _best(lambda: _parse_time.restarts_at_parse(text), number),
        "parse_time_first": _best(lambda: _parse_time.restarts_at_parse(new_text()), number),
        "alias_bomb": _best(lambda: _parse_time.restarts_at_parse(bomb + new_text()), number),
    }


def measure_dagparse_fresh(spec: dict[str, Any]) -> dict[str, float]:
    """The first construction in this (fresh) interpreter of ours (``JobSetOperator`` from
    the text ``measure_dagparse`` wrote, whose parse-time answer its process cached) or of
    the anchor (``KubernetesJobOperator(job_template_file=...)``), after the module's import
    (not timed), as a DAG processor's parse of an unchanged file runs it."""
    os.environ["XDG_CACHE_HOME"] = os.path.join(spec["work"], "cache")
    path = os.path.join(spec["work"], "job.yaml")
    importlib.import_module("airflow.sdk")
    build: Callable[[], Any]
    if spec["subject"] == "ours":
        from airflow_provider_jobset.operators import JobSetOperator

        with open(path, encoding="utf-8") as handle:
            text = handle.read()  # the DAG file's own read of its text: not the operator's

        def build() -> Any:
            return JobSetOperator(task_id="t", jobset=text)
    else:
        from airflow.providers.cncf.kubernetes.operators.job import KubernetesJobOperator

        def build() -> Any:
            return KubernetesJobOperator(task_id="k", job_template_file=path)

    cpu, wall = time.process_time(), time.perf_counter()
    build()
    return {"cpu": time.process_time() - cpu, "wall": time.perf_counter() - wall}


def main(spec: dict[str, Any]) -> None:
    what = spec["what"]
    if what == "import":
        found: Any = measure_import(spec["module"])
    elif what == "validation":
        found = measure_validation(spec)
    elif what == "dagparse_fresh":
        found = measure_dagparse_fresh(spec)
    else:
        found = measure_dagparse(spec)
    print(json.dumps(found))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
