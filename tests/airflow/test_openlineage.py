"""OpenLineage: what a JobSet task reports through the ``openlineage`` provider.

The facets are built by pure functions (:mod:`airflow_provider_jobset.openlineage`), tested
here as tables, against their JSON schema, and for the promise that importing the provider or a
DAG file imports no OpenLineage. Then the operator runs as Airflow runs it (``dag.test()``)
with the provider's listener on, on the devcluster: a JobSet that succeeds and one that fails,
and the events the listener emitted are read back from its ``file`` transport (the provider
builds and emits them in a fork of the task's process, so an in-memory transport would
never see them; OpenLineage ships no test transport).

The ``openlineage`` extra is part of every Airflow environment's lock: without it these tests
fail (they do not skip).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any, get_args

import pytest

from airflow_provider_jobset import __version__
from jobset_core.lifecycle import BACKEND_CHOICES, Handle, Verdict, VerdictKind
from jobset_core.models import load_jobset
from jobset_core.outcome import Outcome, Phase
from tests.airflow._run_dag import IMPORT_WAIT, run_dag

pytestmark = pytest.mark.airflow

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SCHEMA = ROOT / "docs/openlineage/JobsetExecutionRunFacet.json"
PRODUCER = f"https://github.com/airflow-provider-jobset/airflow-provider-jobset/tree/v{__version__}"
SCHEMA_URL = (
    "https://raw.githubusercontent.com/airflow-provider-jobset/airflow-provider-jobset/"
    f"v{__version__}/docs/openlineage/JobsetExecutionRunFacet.json"
    "#/$defs/JobsetExecutionRunFacet"
)
EXTERNAL_SCHEMA = (
    "https://openlineage.io/spec/facets/1-0-2/ExternalQueryRunFacet.json"
    "#/$defs/ExternalQueryRunFacet"
)


def pod(*images: str, init: tuple[str, ...] = ()) -> dict[str, Any]:
    """A pod spec whose containers (and init containers) run ``images``."""
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [{"name": f"c{i}", "image": image} for i, image in enumerate(images)],
    }
    if init:
        spec["initContainers"] = [{"name": f"i{i}", "image": im} for i, im in enumerate(init)]
    return spec


def rjob(name: str, spec: dict[str, Any], replicas: int | None = None) -> dict[str, Any]:
    job = {"name": name, "template": {"spec": {"template": {"spec": spec}}}}
    return job if replicas is None else {**job, "replicas": replicas}


def jobset_of(*rjobs: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "train"}
    if namespace:
        meta["namespace"] = namespace
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": meta,
        "spec": {"replicatedJobs": list(rjobs)},
    }


TWO_GROUPS = jobset_of(
    rjob("leader", pod("repo/leader:1", init=("repo/setup:1",)), replicas=1),
    # A sidecar of the same image: each image once.
    rjob("workers", pod("repo/worker:2", "repo/worker:2", "repo/log:1"), replicas=4),
)
RUN = Handle("train-abc", "team-a", "uid-1", "controller")


def verdict(kind: VerdictKind, phase: Phase | None, reason: str = "", restarts: int = 0) -> Verdict:
    seen = None
    if phase is not None:
        seen = Outcome(
            name=RUN.name,
            namespace=RUN.namespace,
            uid=RUN.uid,
            backend="native",
            phase=phase,
            restarts=restarts,
        )
    return Verdict(
        kind=kind,
        name=RUN.name,
        namespace=RUN.namespace,
        uid=RUN.uid,
        backend="native",
        outcome=seen,
        reason=reason,
    )


GROUPS = [
    {"name": "leader", "replicas": 1, "images": ["repo/setup:1", "repo/leader:1"]},
    {"name": "workers", "replicas": 4, "images": ["repo/worker:2", "repo/log:1"]},
]
RUN_FIELDS = {"namespace": "team-a", "name": "train-abc", "uid": "uid-1"}

#: (JobSet, run, verdict, asked namespace) -> the ``jobset_execution`` facet's own fields
#: (its ``_producer`` and ``_schemaURL`` are checked by every case).
CASES = {
    "before-the-run": (TWO_GROUPS, None, None, "asked", {"backend": "auto", "namespace": "asked"}),
    "before-the-run-no-namespace": (TWO_GROUPS, None, None, None, {"backend": "auto"}),
    "submitted-no-verdict-yet": (
        TWO_GROUPS,
        RUN,
        None,
        "asked",
        {"backend": "controller", **RUN_FIELDS},
    ),
    "uid-not-known-yet": (
        TWO_GROUPS,
        Handle("train-abc", "team-a", "", "native"),
        None,
        None,
        {"backend": "native", "namespace": "team-a", "name": "train-abc"},
    ),
    "completed": (
        TWO_GROUPS,
        RUN,
        verdict("completed", Phase.COMPLETED, "AllJobsCompleted"),
        None,
        {
            "backend": "native",  # the verdict's word on the run is the last
            **RUN_FIELDS,
            "outcome": {
                "verdict": "completed",
                "phase": "Completed",
                "reason": "AllJobsCompleted",
                "restarts": 0,
            },
        },
    ),
    "failed-after-restarts": (
        TWO_GROUPS,
        RUN,
        verdict("failed", Phase.FAILED, "FailedJobs", restarts=2),
        None,
        {
            "backend": "native",
            **RUN_FIELDS,
            "outcome": {
                "verdict": "failed",
                "phase": "Failed",
                "reason": "FailedJobs",
                "restarts": 2,
            },
        },
    ),
    "restart-handed-back": (
        TWO_GROUPS,
        RUN,
        verdict("restarting", Phase.RESTARTING, restarts=1),
        None,
        {
            "backend": "native",
            **RUN_FIELDS,
            "outcome": {"verdict": "restarting", "phase": "Restarting", "restarts": 1},
        },
    ),
    "timeout-never-seen": (
        TWO_GROUPS,
        RUN,
        verdict("timeout", None, "Timeout"),
        None,
        {
            "backend": "native",
            **RUN_FIELDS,
            "outcome": {"verdict": "timeout", "reason": "Timeout", "restarts": 0},
        },
    ),
}
GROUPS_OF = {
    "default-replicas-no-images": (
        jobset_of(rjob("w", {"containers": [{"name": "c"}]})),
        [{"name": "w", "replicas": 1, "images": []}],
    ),
    "zero-replicas-odd-template": (
        jobset_of(rjob("w", {"containers": "nonsense", "initContainers": [7]}, replicas=0)),
        [{"name": "w", "replicas": 0, "images": []}],
    ),
    "unreadable": (None, []),
}


def serialized(facet: Any) -> dict[str, Any]:
    from openlineage.client.serde import Serde

    return Serde.to_dict(facet)


def facets_of(
    jobset: dict[str, Any] | None,
    run: Handle | None,
    verdict: Verdict | None,
    namespace: str | None = None,
) -> dict[str, dict[str, Any]]:
    from airflow_provider_jobset.openlineage import run_facets

    spec = load_jobset(jobset) if jobset is not None else None
    built = run_facets(spec, run=run, verdict=verdict, backend="auto", namespace=namespace)
    return {key: serialized(facet) for key, facet in built.items()}


@pytest.mark.airflow_matrix
@pytest.mark.parametrize(
    ("jobset", "run", "ended", "namespace", "fields"), CASES.values(), ids=CASES
)
def test_the_execution_facet(
    jobset: dict[str, Any],
    run: Handle | None,
    ended: Verdict | None,
    namespace: str | None,
    fields: dict[str, Any],
) -> None:
    facets = facets_of(jobset, run, ended, namespace)
    assert facets["jobset_execution"] == {
        "_producer": PRODUCER,
        "_schemaURL": SCHEMA_URL,
        "replicatedJobs": GROUPS,
        **fields,
    }
    uid = fields.get("uid")
    expected = {"jobset_execution"} | ({"externalQuery"} if uid else set())
    assert set(facets) == expected
    if uid:
        assert facets["externalQuery"] == {
            "_producer": PRODUCER,
            "_schemaURL": EXTERNAL_SCHEMA,
            "externalQueryId": uid,
            "source": "kubernetes",
        }


@pytest.mark.parametrize(("jobset", "groups"), GROUPS_OF.values(), ids=GROUPS_OF)
def test_replicated_jobs_as_written(
    jobset: dict[str, Any] | None, groups: list[dict[str, Any]]
) -> None:
    facet = facets_of(jobset, None, None)["jobset_execution"]
    assert facet["replicatedJobs"] == groups


def _schema() -> dict[str, Any]:
    return json.loads(SCHEMA.read_text())  # type: ignore[no-any-return]


@pytest.mark.parametrize("case", CASES)
def test_every_facet_matches_its_schema(case: str) -> None:
    """The facet's own part of its published schema, and nothing it does not describe (the
    base facet's part, ``_producer`` and ``_schemaURL``, is OpenLineage's: checked above)."""
    import jsonschema

    schema = _schema()
    own = schema["$defs"]["JobsetExecutionRunFacet"]["allOf"][1]
    base = {"_producer": {"type": "string"}, "_schemaURL": {"type": "string"}}
    closed = {
        **own,
        "properties": {**own["properties"], **base},
        "additionalProperties": False,
        "$defs": schema["$defs"],
    }
    jobset, run, ended, namespace, _ = CASES[case]
    jsonschema.validate(facets_of(jobset, run, ended, namespace)["jobset_execution"], closed)


def test_the_schema_says_what_the_code_knows() -> None:
    """The schema's choices are the core's, and its URL is this repository's file at this
    version's tag."""
    schema = _schema()
    defs = schema["$defs"]
    props = defs["JobsetExecutionRunFacet"]["allOf"][1]["properties"]
    assert props["backend"]["enum"] == list(BACKEND_CHOICES)
    assert defs["Outcome"]["properties"]["verdict"]["enum"] == list(get_args(VerdictKind))
    assert defs["Outcome"]["properties"]["phase"]["enum"] == [p.value for p in Phase]
    assert set(defs["Outcome"]["properties"]) == {"verdict", "phase", "reason", "restarts"}
    assert set(defs["ReplicatedJob"]["properties"]) == {"name", "replicas", "images"}
    source = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Source"]
    repo = source.removeprefix("https://github.com/")
    raw = f"https://raw.githubusercontent.com/{repo}/v{__version__}/"
    assert schema["$id"] == raw + str(SCHEMA.relative_to(ROOT))
    assert schema["$id"] + "#/$defs/JobsetExecutionRunFacet" == SCHEMA_URL
    assert f"{source}/tree/v{__version__}" == PRODUCER


#: What the subprocess of the test below imports, then which modules it finds loaded.
IMPORT_CHECK = """
import runpy, sys
import airflow_provider_jobset, airflow_provider_jobset.hooks, airflow_provider_jobset.triggers
runpy.run_path(sys.argv[1])
# Airflow's providers manager reads each installed provider's info (and so its package).
read = ("airflow.providers.openlineage", "airflow.providers.openlineage.get_provider_info")
ours = ("airflow.providers.openlineage.", "airflow_provider_jobset.openlineage")
bad = [
    m for m in sys.modules
    if m.split(".")[0] == "openlineage" or (m.startswith(ours) and m not in read)
]
print(bad)
sys.exit(1 if bad else 0)
"""


def test_importing_the_provider_and_a_dag_loads_no_openlineage(tmp_path: Path) -> None:
    dag = tmp_path / "lineage_free.py"
    dag.write_text(
        "from datetime import datetime\n"
        "from airflow.sdk import DAG\n"
        "from airflow_provider_jobset.operators import JobSetOperator\n"
        "from airflow_provider_jobset.sensors import JobSetSensor\n"
        "with DAG('lineage_free', schedule=None, start_date=datetime(2026, 1, 1)):\n"
        f"    JobSetOperator(task_id='t', jobset={TWO_GROUPS!r})\n"
    )
    run = subprocess.run(  # noqa: PLW1510 - the return code is asserted
        [sys.executable, "-c", IMPORT_CHECK, str(dag)],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=IMPORT_WAIT,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_operator_reports_from_what_it_holds() -> None:
    """Before the run, what was asked; after it, the run and its verdict (the operator keeps
    the verdict it concluded with)."""
    from airflow_provider_jobset.operators import JobSetOperator

    spec = jobset_of(*TWO_GROUPS["spec"]["replicatedJobs"], namespace="from-spec")
    op = JobSetOperator(task_id="t", jobset=spec, backend="controller")
    start = op.get_openlineage_facets_on_start()
    assert (start.inputs, start.outputs, start.job_facets) == ([], [], {})
    assert serialized(start.run_facets["jobset_execution"]) == {
        "_producer": PRODUCER,
        "_schemaURL": SCHEMA_URL,
        "backend": "controller",
        "namespace": "from-spec",
        "replicatedJobs": GROUPS,
    }
    op._handle = RUN
    op._verdict = verdict("failed", Phase.FAILED, "FailedJobs")
    for ended in (
        op.get_openlineage_facets_on_complete(None),
        op.get_openlineage_facets_on_failure(None),
    ):
        facet = serialized(ended.run_facets["jobset_execution"])
        assert (facet["uid"], facet["outcome"]["verdict"]) == ("uid-1", "failed")
    broken = JobSetOperator(task_id="b", jobset="kind: NotAJobSet\n", namespace="ns")
    facet = serialized(
        broken.get_openlineage_facets_on_failure(None).run_facets["jobset_execution"]
    )
    assert (facet["replicatedJobs"], facet["namespace"], facet["backend"]) == ([], "ns", "auto")


# ------------------------------------------------------------------------------ on the cluster

DAG = """
from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_jobset.operators import JobSetOperator

common = dict(namespace={ns!r}, backend={backend!r}, deferrable={deferrable!r},
              delete_policy="never", retries=0)
with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1)):
    JobSetOperator(task_id="ok", jobset={ok!r}, **common)
    JobSetOperator(task_id="bad", jobset={bad!r}, **common)
"""


def devcluster_jobset(name: str, annotations: dict[str, str]) -> dict[str, Any]:
    """A JobSet of two replicated jobs whose pods the devcluster ends as ``annotations`` say."""

    def group(name: str, replicas: int, image: str) -> dict[str, Any]:
        template = {"metadata": {"annotations": annotations}, "spec": pod(image)}
        job = {"backoffLimit": 0, "completions": 1, "parallelism": 1, "template": template}
        return {"name": name, "replicas": replicas, "template": {"spec": job}}

    body = jobset_of(
        group("leader", 1, "registry.invalid/leader:1"),
        group("workers", 2, "registry.invalid/worker:1"),
    )
    body["metadata"]["name"] = name
    return body


def events_of(path: Path) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """The events of each (job name, event type) the file transport appended, in order."""
    found: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for line in path.read_text().splitlines():
        event = json.loads(line)
        found.setdefault((event["job"]["name"], event["eventType"]), []).append(event)
    return found


@pytest.mark.cluster
@pytest.mark.airflow_matrix
@pytest.mark.parametrize(
    ("backend", "deferrable"),
    [("controller", False), ("controller", True), ("native", False)],
    ids=["controller-worker", "controller-deferrable", "native-worker"],
)
def test_events_carry_the_run(  # noqa: PLR0917
    backend: str,
    deferrable: bool,
    cluster_namespace: str,
    kube_conn: str,
    dag_file: Any,
    tmp_path: Path,
) -> None:
    dag_id = f"lineage_{backend}_{'deferred' if deferrable else 'worker'}"
    ok = devcluster_jobset("ok", {"devcluster/termination-message": '{"loss": 0.1}'})
    bad = devcluster_jobset("bad", {"devcluster/exit-code": "3"})
    source = DAG.format(
        ns=cluster_namespace, backend=backend, deferrable=deferrable, dag_id=dag_id, ok=ok, bad=bad
    )
    events = tmp_path / "events.jsonl"
    transport = {"type": "file", "log_file_path": str(events), "append": True}
    env = {**os.environ, "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(transport)}
    result = run_dag(dag_file(dag_id, source), dag_id, env)
    tasks = result["tasks"]
    assert (tasks["ok"]["state"], tasks["bad"]["state"]) == ("success", "failed"), tasks
    assert events.is_file(), "the listener emitted nothing"
    emitted = events_of(events)

    groups = [
        {"name": "leader", "replicas": 1, "images": ["registry.invalid/leader:1"]},
        {"name": "workers", "replicas": 2, "images": ["registry.invalid/worker:1"]},
    ]
    base = {"_producer": PRODUCER, "_schemaURL": SCHEMA_URL, "replicatedJobs": groups}
    for task in ("ok", "bad"):
        starts = emitted[(f"{dag_id}.{task}", "START")]
        for start in starts:  # a deferred task starts again when it resumes
            assert start["run"]["facets"]["jobset_execution"] == {
                **base,
                "backend": backend,
                "namespace": cluster_namespace,
            }

    def run_of(task: str) -> dict[str, Any]:
        xcom = tasks[task]["xcom"]
        return {
            **base,
            "backend": backend,
            "namespace": cluster_namespace,
            "name": xcom["jobset_name"],
            "uid": xcom["jobset_uid"],
        }

    [complete] = emitted[(f"{dag_id}.ok", "COMPLETE")]
    facets = complete["run"]["facets"]
    assert facets["jobset_execution"] == {
        **run_of("ok"),
        "outcome": {
            "verdict": "completed",
            "phase": "Completed",
            "reason": "AllJobsCompleted",  # as upstream says it, on both backends
            "restarts": 0,
        },
    }
    assert facets["externalQuery"]["externalQueryId"] == tasks["ok"]["xcom"]["jobset_uid"]

    [fail] = emitted[(f"{dag_id}.bad", "FAIL")]
    facets = fail["run"]["facets"]
    assert facets["jobset_execution"] == {
        **run_of("bad"),
        "outcome": {
            "verdict": "failed",
            "phase": "Failed",
            "reason": "FailedJobs",
            "restarts": 0,
        },
    }
    assert facets["externalQuery"]["externalQueryId"] == tasks["bad"]["xcom"]["jobset_uid"]
    assert "errorMessage" in facets, "the provider's own facet of the task's error"
    assert (f"{dag_id}.bad", "COMPLETE") not in emitted
