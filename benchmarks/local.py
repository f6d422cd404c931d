"""The costs a user meets before any run: ``jobsetctl validate``'s start, validation, the
import of a DAG file, and building an operator from YAML at DAG parse (this replaces the old
``scripts/bench_dag_parse.py``).

=======================  ======================================  ===============================
figure                   ours                                    anchor / floor
=======================  ======================================  ===============================
validate start           ``jobsetctl validate FILE`` (a process) ``kubectl create --dry-run=server
                                                                 -f FILE`` / ``python -c pass``;
                                                                 other anchor: pydantic + PyYAML
                                                                 imported, one model validating
validate one JobSet      load + validate in-process              server-side dry run / YAML load
validation throughput    the same, back to back                  dry runs back to back / loads
DAG-file import          ``airflow_provider_jobset.operators``   the ``job`` operators module of
                                                                 ``cncf.kubernetes``
operator from YAML       ``JobSetOperator(jobset=text)``         ``KubernetesJobOperator(job_
                         (and, in its params, the first one a    template_file=...)`` / YAML load
                         fresh interpreter builds, as a DAG
                         processor's parse does)
validation at scale      load + validate 1,000 and 5,000         ``yaml.load_all`` of the same
                         replicated jobs, a file of 10,000       text with libyaml (read, nothing
                         JobSets                                 checked)
=======================  ======================================  ===============================

Timed processes run with bytecode, as an installed package does (:func:`_with_bytecode`), and
start in rounds of every subject (:func:`_time_starts`).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from benchmarks.cluster import DEVCLUSTER, ROOT
from benchmarks.context import Context
from benchmarks.results import Figure
from benchmarks.stats import percentile

__all__ = ["run"]

OURS_MODULE = "airflow_provider_jobset.operators"

#: The least a command that validates YAML with pydantic models pays: the two imports, one
#: model's build and one value validated (with pydantic's plugins off, as ``jobsetctl`` runs).
DEPENDENCIES = (
    "python importing pydantic and PyYAML, one model validating one YAML value "
    "(what any command built on them pays)"
)
_DEPENDENCIES_CODE = (
    "from typing import Annotated\n"
    "import yaml\n"
    "from pydantic import BaseModel, Field\n"
    "class M(BaseModel):\n"
    "    x: Annotated[int, Field(ge=0)]\n"
    "M.model_validate(yaml.safe_load('x: 1'))\n"
)
ANCHOR_MODULE = "airflow.providers.cncf.kubernetes.operators.job"


class _ValidationParams(TypedDict):
    """The params both validation figures carry."""

    jobset_bytes: int
    anchor_name: str


class _ImportParams(TypedDict):
    """The params both import figures carry."""

    anchor_name: str
    over: str
    module: str


def _with_bytecode(ctx: Context, env: Mapping[str, str]) -> dict[str, str]:
    """``env`` for a process timed as an installed package runs it: with its bytecode.

    The project's environment installs this checkout in editable mode (no bytecode), and an
    environment may set ``PYTHONDONTWRITEBYTECODE``: every start would then compile the
    checkout's modules (about 0.1 s for ``jobsetctl validate``), which an installed wheel,
    compiled at install, never does. The timed processes share a bytecode folder of the
    run's own (``PYTHONPYCACHEPREFIX``; nothing is written into the checkout), filled by an
    untimed first run of each subject.
    """
    out = dict(env, PYTHONPYCACHEPREFIX=str(ctx.work / "bytecode"))
    out.pop("PYTHONDONTWRITEBYTECODE", None)
    return out


def _inproc(ctx: Context, spec: dict[str, Any]) -> Any:
    env = _with_bytecode(
        ctx,
        dict(
            os.environ,
            AIRFLOW_HOME=str(ctx.work / "airflow-home"),
            KUBECONFIG=str(ctx.cluster.kubeconfig),
        ),
    )
    args = ["-m", "benchmarks.inproc", json.dumps(spec)]
    return _python(args, f"benchmarks.inproc {spec['what']}", timeout=600, env=env)


def _python(args: list[str], what: str, *, timeout: float, env: Any = None) -> Any:
    """The last line of a fresh interpreter's output, as JSON (``what`` names it in errors)."""
    done = subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


@dataclass
class _Started:
    """One command whose process starts are timed: its wall and CPU seconds per start."""

    argv: list[str]
    env: dict[str, str]
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def once(self) -> None:
        """Run it once; the CPU seconds are user and system, of the process and what it
        waited for (on a shared machine the wall time moves with the load, the CPU time
        much less)."""
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(
            self.argv, env=self.env, capture_output=True, text=True, check=False, timeout=120
        )
        self.wall.append(time.perf_counter() - started)
        now = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.cpu.append(now.ru_utime - used.ru_utime + now.ru_stime - used.ru_stime)
        if done.returncode != 0:
            raise RuntimeError(
                f"{' '.join(self.argv)} failed: {done.stdout[-1000:]}{done.stderr[-1000:]}"
            )


def _time_starts(subjects: Sequence[_Started], times: int) -> None:
    """Start each subject ``times`` times, in rounds that start each once (after an untimed
    start of each, which warms the page cache as a user's is and writes the bytecode): a
    slow spell of a shared machine falls on every subject alike, not on one of them."""
    for subject in subjects:
        subject.once()
        subject.wall.clear()
        subject.cpu.clear()
    for _ in range(times):
        for subject in subjects:
            subject.once()


def _kubectl(ctx: Context) -> str:
    """The devcluster's kubectl (the cluster's own version); on another cluster, the one on
    ``PATH`` if there is one."""
    if ctx.cluster.state_dir is None:
        found = shutil.which("kubectl")
        if found:
            return found
    done = subprocess.run(
        [sys.executable, str(DEVCLUSTER), "bin-dir"], capture_output=True, text=True, check=True
    )
    return str(Path(done.stdout.strip().splitlines()[-1]) / "kubectl")


def _starts(ctx: Context, namespace: str) -> list[Figure]:
    from jobset_core import dump_yaml, pytorch_ddp

    jobset = pytorch_ddp("ddp", "torch", ["train.py"], nodes=4, procs_per_node=8, gpus_per_node=8)
    path = ctx.work / "jobset.yaml"
    path.write_text(dump_yaml(jobset), encoding="utf-8")
    plain = dict(os.environ, KUBECONFIG=str(ctx.cluster.kubeconfig))
    env = _with_bytecode(ctx, plain)
    jobsetctl = [str(Path(sys.executable).parent / "jobsetctl"), "validate", str(path)]
    kubectl = [_kubectl(ctx), "create", "--dry-run=server", "-n", namespace, "-f", str(path)]
    ours = _Started(jobsetctl, env)
    # As earlier runs measured it: the checkout compiled at every start (an editable install
    # where PYTHONDONTWRITEBYTECODE is set), for comparison with them.
    compiled = _Started(jobsetctl, dict(plain, PYTHONDONTWRITEBYTECODE="1"))
    anchor = _Started([*kubectl, "-o", "name"], env)
    floor = _Started([sys.executable, "-c", "pass"], env)
    dependencies = _Started(
        [sys.executable, "-c", _DEPENDENCIES_CODE], dict(env, PYDANTIC_DISABLE_PLUGINS="__all__")
    )
    _time_starts([ours, compiled, anchor, floor, dependencies], ctx.profile.starts)

    def p50(xs: Sequence[float]) -> float | None:
        return percentile(xs, 50)

    return [
        Figure.of(
            "local: jobsetctl validate, process start to answer (p50)",
            "s",
            p50(ours.wall),
            p50(anchor.wall),
            floor=p50(floor.wall),
            n=ctx.profile.starts,
            anchor_name="kubectl create --dry-run=server -f "
            "(the server's and the webhook's checks)",
            floor_name="python -c pass (the interpreter's start)",
            other_anchor={DEPENDENCIES: p50(dependencies.wall)},
            max=max(ours.wall),
            anchor_max=max(anchor.wall),
            bytecode="a folder of the run's own (PYTHONPYCACHEPREFIX), written by an untimed "
            "first run, as an installed wheel has its modules compiled",
            rounds="each round starts ours, the checkout compiled, the anchor, the floor and "
            "the dependencies' least once each, one after the other",
            checkout_compiled_each_start_p50=p50(compiled.wall),
            cpu_p50=p50(ours.cpu),
            anchor_cpu_p50=p50(anchor.cpu),
            floor_cpu_p50=p50(floor.cpu),
            dependencies_cpu_p50=p50(dependencies.cpu),
        )
    ]


def _validation(ctx: Context, namespace: str) -> list[Figure]:
    found = _inproc(
        ctx,
        {
            "what": "validation",
            "seconds": ctx.profile.throughput_seconds,
            "kubeconfig": str(ctx.cluster.kubeconfig),
            "namespace": namespace,
        },
    )
    ours, server, loads = found["ours"], found["server"], found["yaml"]

    def ms(xs: Sequence[float]) -> float:
        p50 = percentile(xs, 50)
        if p50 is None:
            raise RuntimeError("benchmarks.inproc validation returned no timings")
        return p50 * 1000

    def rate(xs: Sequence[float]) -> float:
        return len(xs) / sum(xs)

    params: _ValidationParams = {
        "jobset_bytes": found["bytes"],
        "anchor_name": "server-side dry run (a round trip)",
    }
    return [
        Figure.of(
            "local: validate one JobSet in-process (p50)",
            "ms",
            ms(ours),
            ms(server),
            floor=ms(loads),
            n=len(ours),
            floor_name="yaml.safe_load of its text",
            anchor_n=len(server),
            **params,
        ),
        Figure.of(
            "local: validation throughput",
            "JobSets/s",
            rate(ours),
            rate(server),
            floor=rate(loads),
            n=len(ours),
            floor_name="yaml.safe_load of its text",
            higher_is_better=True,
            **params,
        ),
    ]


def _imports(ctx: Context) -> list[Figure]:
    runs: dict[str, list[dict[str, float]]] = {OURS_MODULE: [], ANCHOR_MODULE: []}
    for module in runs:  # untimed: writes each module's bytecode (see _with_bytecode)
        _inproc(ctx, {"what": "import", "module": module})
    for _ in range(ctx.profile.imports):
        for module, found in runs.items():  # alternating: the same machine state for both
            found.append(_inproc(ctx, {"what": "import", "module": module}))

    def median(module: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[module])

    common: _ImportParams = {
        "anchor_name": "KubernetesJobOperator (its module)",
        "over": "airflow.sdk (imported first)",
        "module": OURS_MODULE,
    }
    return [
        Figure.of(
            "local: DAG-file import, CPU over airflow.sdk",
            "s",
            median(OURS_MODULE, "cpu"),
            median(ANCHOR_MODULE, "cpu"),
            n=ctx.profile.imports,
            wall=median(OURS_MODULE, "wall"),
            anchor_wall=median(ANCHOR_MODULE, "wall"),
            **common,
        ),
        Figure.of(
            "local: DAG-file import, RSS over airflow.sdk",
            "MiB",
            median(OURS_MODULE, "rss") / 2**20,
            median(ANCHOR_MODULE, "rss") / 2**20,
            n=ctx.profile.imports,
            **common,
        ),
    ]


def _dagparse(ctx: Context) -> list[Figure]:
    found = _inproc(
        ctx,
        {
            "what": "dagparse",
            "work": str(ctx.work),
            "number": 50 if ctx.profile.name == "full" else 3,
        },
    )
    fresh: dict[str, list[dict[str, float]]] = {"ours": [], "anchor": []}
    for _ in range(ctx.profile.imports):
        for subject, found_fresh in fresh.items():  # alternating, as the imports are
            spec = {"what": "dagparse_fresh", "work": str(ctx.work), "subject": subject}
            found_fresh.append(_inproc(ctx, spec))

    def fresh_ms(subject: str, key: str) -> float:
        return statistics.median(r[key] for r in fresh[subject]) * 1000

    return [
        Figure.of(
            "local: operator built from a YAML text at DAG parse (parsed before)",
            "ms",
            found["ours"] * 1000,
            found["anchor"] * 1000,
            floor=found["yaml"] * 1000,
            n=5,
            anchor_name="KubernetesJobOperator(job_template_file=...) (reads it at execute)",
            floor_name="yaml.safe_load of the text",
            jobset_bytes=found["bytes"],
            first_parse_ms=found["ours_first"] * 1000,
            parse_time_read_ms=found["parse_time_read"] * 1000,
            parse_time_first_ms=found["parse_time_first"] * 1000,
            alias_bomb_ms=found["alias_bomb"] * 1000,
            fresh_process_ms=fresh_ms("ours", "wall"),
            anchor_fresh_process_ms=fresh_ms("anchor", "wall"),
            fresh_process_cpu_ms=fresh_ms("ours", "cpu"),
            anchor_fresh_process_cpu_ms=fresh_ms("anchor", "cpu"),
            fresh_processes=ctx.profile.imports,
        )
    ]


def _replicated_job(index: int) -> dict[str, Any]:
    container = {
        "name": "main",
        "image": "busybox:1.36",
        "command": ["sh", "-c", "echo hello"],
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
    }
    pod = {"restartPolicy": "Never", "containers": [container]}
    return {
        "name": f"worker-{index}",
        "replicas": 1,
        "template": {"spec": {"completions": 1, "parallelism": 1, "template": {"spec": pod}}},
    }


def _scale_jobset(name: str, rjobs: int) -> dict[str, Any]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": {"replicatedJobs": [_replicated_job(i) for i in range(rjobs)]},
    }


def measure_validation_scale(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Load + validate (as ``jobsetctl validate`` does) of one JobSet of each size in
    ``spec["rjobs"]`` and of a file of ``spec["documents"]`` one-job JobSets, beside
    ``yaml.load_all`` of the same text with libyaml; the best of ``spec["number"]`` each.
    Runs in a fresh interpreter (``python -c``), warmed on a small JobSet first."""
    import yaml

    from jobset_core.models import load_jobsets
    from jobset_core.validation import validate

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    def ours(text: str) -> None:
        if any(validate(jobset) for jobset in load_jobsets(text)):
            raise AssertionError("the benchmark's JobSets are invalid")

    def best(call: Any, text: str) -> tuple[float, float]:
        wall, cpu = [], []
        for _ in range(int(spec["number"])):
            started, started_cpu = time.perf_counter(), time.process_time()
            call(text)
            wall.append(time.perf_counter() - started)
            cpu.append(time.process_time() - started_cpu)
        return min(wall), min(cpu)

    ours(yaml.safe_dump(_scale_jobset("warm", 3)))
    inputs = [
        ("rjobs", n, yaml.safe_dump(_scale_jobset("big", n), sort_keys=False))
        for n in spec["rjobs"]
    ]
    documents = [_scale_jobset(f"js-{i}", 1) for i in range(int(spec["documents"]))]
    inputs.append(("documents", len(documents), yaml.safe_dump_all(documents, sort_keys=False)))
    found = []
    for what, size, text in inputs:
        wall, cpu = best(ours, text)
        anchor, _ = best(lambda t: list(yaml.load_all(t, Loader=loader)), text)
        found.append(
            {
                "what": what,
                "size": size,
                "bytes": len(text.encode()),
                "ours": wall,
                "cpu": cpu,
                "anchor": anchor,
                "loader": loader.__name__,
            }
        )
    return found


def _scale(ctx: Context) -> list[Figure]:
    full = ctx.profile.name == "full"
    number = 2 if full else 1
    spec: dict[str, Any] = {
        "rjobs": [1000, 5000] if full else [10, 20],
        "documents": 10_000 if full else 20,
        "number": number,
    }
    code = (
        "import json, sys; from benchmarks.local import measure_validation_scale as m; "
        "print(json.dumps(m(json.loads(sys.argv[1]))))"
    )
    measured = _python(["-c", code, json.dumps(spec)], "validation at scale", timeout=1800)
    figures = []
    for item in measured:
        what = (
            f"{item['size']:,} replicated jobs in one JobSet"
            if item["what"] == "rjobs"
            else f"a file of {item['size']:,} JobSets"
        )
        figures.append(
            Figure.of(
                f"local: load + validate {what} (best of {number})",
                "s",
                item["ours"],
                item["anchor"],
                n=number,
                anchor_name=f"yaml.load_all of the same text ({item['loader']}: read, nothing "
                "checked)",
                jobset_bytes=item["bytes"],
                cpu=item["cpu"],
            )
        )
    return figures


def run(ctx: Context) -> list[Figure]:
    namespace = ctx.cluster.namespaces("bench-local", 1)[0]
    figures = _starts(ctx, namespace) + _validation(ctx, namespace) + _imports(ctx) + _dagparse(ctx)
    figures += _scale(ctx)
    ctx.cluster.delete_namespaces([namespace])
    return figures
