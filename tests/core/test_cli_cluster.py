"""``jobsetctl run/status/delete/logs`` against the devcluster (controller backend).

Most tests call :func:`jobset_core.cli.main` in-process with captured streams; the
kill-and-reattach test runs ``python -m jobset_core.cli run`` as real processes.
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobset_core import cli as jobsetctl
from jobset_core.cli import Command
from jobset_core.cli import cluster as cli_cluster

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]


def rjob(name: str, replicas: int = 1, **annotations: str) -> dict[str, Any]:
    notes = {"devcluster/run-seconds": "0.5", **annotations}
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {
                "parallelism": 1,
                "completions": 1,
                "backoffLimit": 0,
                "template": {
                    "metadata": {"annotations": notes},
                    "spec": {"containers": [{"name": "main", "image": "registry.invalid/w:1"}]},
                },
            }
        },
    }


def write(tmp_path: Path, name: str, *rjobs: dict[str, Any], **spec: Any) -> Path:
    body = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": {"replicatedJobs": list(rjobs), **spec},
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


class Cli:
    def __init__(self, devcluster: Any, namespace: str) -> None:
        self.base = ["--kubeconfig", str(devcluster.kubeconfig), "-n", namespace]

    def __call__(self, command: str, *args: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = jobsetctl.main(
            [command, *args, *self.base], stdout=out, stderr=err, stdin=io.StringIO()
        )
        return code, out.getvalue(), err.getvalue()


@pytest.fixture
def cli(devcluster: Any, cluster_namespace: str) -> Cli:
    return Cli(devcluster, cluster_namespace)


def test_commands_plug_into_jobsetctl() -> None:
    commands = cli_cluster.CLUSTER_COMMANDS
    assert [c.name for c in commands] == ["run", "status", "delete", "logs"]
    assert all(isinstance(c, Command) for c in commands)
    # jobsetctl's table carries them after validate and render, one entry each.
    names = [c.name for c in jobsetctl.COMMANDS]
    assert names == ["validate", "render", "run", "status", "delete", "logs"]
    out = io.StringIO()
    assert jobsetctl.main(["run", "--help"], stdout=out, stderr=io.StringIO()) == 0
    assert "--follow-logs" in out.getvalue() and "--backend" in out.getvalue()
    assert jobsetctl.main(["logs"], stdout=io.StringIO(), stderr=io.StringIO()) == 2


def test_run_completed_prints_progress_and_result(cli: Cli, tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "ok",
        rjob("w", 2, **{"devcluster/termination-message": '{"score": 1}', "devcluster/log": "hi"}),
    )
    code, out, err = cli("run", str(path), "--backend", "controller", "--follow-logs")
    assert code == cli_cluster.EXIT_COMPLETED, err
    lines = out.splitlines()
    assert lines[0].startswith("created: JobSet ") and "backend=controller" in lines[0]
    assert any(line.startswith("status: Running") for line in lines)
    assert any(line.startswith("status: Completed") for line in lines)
    assert any(re.fullmatch(r"log: \[ok-w-0-0-\w+\] hi", line) for line in lines), out
    assert '  result: {"score": 1}' in lines
    # Running the same file again adopts the finished run instead of starting another.
    code, out, _ = cli("run", str(path))
    assert code == 0 and out.startswith("adopted: ")


def test_run_follows_every_pod_with_log_pods_all(cli: Cli, tmp_path: Path) -> None:
    """``--follow-logs --log-pods all``: each pod's lines once, prefixed with the pod, even for
    pods that run for a moment only (their ended logs are read to the end)."""
    notes = {"devcluster/log": "one\ntwo", "devcluster/run-seconds": "0.5"}
    path = write(tmp_path, "every", rjob("a", 2, **notes), rjob("b", 1, **notes))
    code, out, err = cli("run", str(path), "--follow-logs", "--log-pods", "all")
    assert code == cli_cluster.EXIT_COMPLETED, err
    shown = [line for line in out.splitlines() if line.startswith("log: ")]
    pods = {re.fullmatch(r"log: \[(every-[ab]-\d-0-\w+)\] (one|two)", line)[1] for line in shown}
    assert len(pods) == 3 and len(shown) == 6, out


def test_run_refuses_a_bad_log_or_pod_start_flag(cli: Cli, tmp_path: Path) -> None:
    path = write(tmp_path, "flags", rjob("w"))
    for flags in (["--log-pods", "leader"], ["--start-grace", "-1"], ["--log-max-pods", "0"]):
        code, _, err = cli("run", str(path), *flags)
        assert code == 2 and flags[0] in err, (flags, err)


def test_run_failed_exits_1_with_failed_pod_logs(cli: Cli, tmp_path: Path) -> None:
    path = write(
        tmp_path, "bad", rjob("w", **{"devcluster/exit-code": "2", "devcluster/log": "oops"})
    )
    code, out, err = cli("run", str(path))
    assert code == cli_cluster.EXIT_FAILED
    assert "Failed: JobSet" in out and "FailedJobs" in out
    assert "--- failed pod bad-w-0-0-" in err and "oops" in err


def test_run_invalid_input_exits_2_and_creates_nothing(
    cli: Cli, tmp_path: Path, devcluster: Any, cluster_namespace: str
) -> None:
    path = write(tmp_path, "Not_Valid", rjob("w"), rjob("w"))
    code, out, err = cli("run", str(path))
    assert code == cli_cluster.EXIT_INVALID
    assert "metadata.name: " in err and "spec.replicatedJobs[1]: Duplicate value" in err
    assert out == ""
    items = devcluster.custom.list_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", cluster_namespace, "jobsets"
    )["items"]
    assert items == []
    assert cli("run", str(tmp_path / "missing.yaml"))[0] == cli_cluster.EXIT_INVALID
    assert cli("run", str(path), "--backend", "nope")[0] == cli_cluster.EXIT_INVALID


def test_run_timeout_exits_3(cli: Cli, tmp_path: Path) -> None:
    path = write(tmp_path, "forever", rjob("w", **{"devcluster/never-finish": "true"}))
    code, _, err = cli("run", str(path), "--timeout", "2")
    assert code == cli_cluster.EXIT_TIMEOUT
    assert "did not finish within 2s" in err


def test_status_delete_and_logs(cli: Cli, tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "st",
        rjob("a", **{"devcluster/log": "from a"}),
        rjob("b", 2, **{"devcluster/log": "from b"}),
    )
    assert cli("run", str(path))[0] == 0
    code, out, _ = cli("status", "st")
    assert code == 0 and "Completed: JobSet" in out and "b: replicas=2" in out
    code, out, _ = cli("status", "st", "-o", "json")
    document = json.loads(out)
    assert set(document) == {
        "conditions",
        "terminalState",
        "restarts",
        "restartsCountTowardsMax",
        "replicatedJobsStatus",
    }
    assert document["terminalState"] == "Completed"
    assert {s["name"]: s["succeeded"] for s in document["replicatedJobsStatus"]} == {"a": 1, "b": 2}
    assert cli("logs", "st") == (0, "from a\n", "")
    assert cli("logs", "st", "--replicated-job", "b", "--job-index", "1")[1] == "from b\n"
    code, _, err = cli("logs", "st", "--replicated-job", "b", "--job-index", "2")
    assert code == 1 and "no pod" in err
    code, out, _ = cli("delete", "st", "--wait")
    assert code == 0 and out == f"deleted: JobSet {cli.base[-1]}/st\n"
    code, _, err = cli("status", "st")
    assert code == 1 and "not found" in err


@pytest.mark.nojobset  # also where "auto" can only be native: the same words when it is gone
def test_status_delete_and_logs_find_a_native_run_without_backend(
    cli: Cli, tmp_path: Path, devcluster: Any, cluster_namespace: str
) -> None:
    path = write(tmp_path, "nat", rjob("w", **{"devcluster/log": "native hi"}))
    assert cli("run", str(path), "--backend", "native")[0] == 0
    code, out, err = cli("status", "nat")  # no --backend: the anchor is found
    assert code == 0, err
    assert out.startswith("backend: native uid: ") and "Completed: JobSet" in out
    code, out, _ = cli("status", "nat", "-o", "json")
    assert code == 0 and json.loads(out)["terminalState"] == "Completed"
    assert cli("logs", "nat") == (0, "native hi\n", "")
    code, out, _ = cli("delete", "nat", "--wait")
    assert code == 0 and out == f"deleted: JobSet {cluster_namespace}/nat\n"
    code, _, err = cli("status", "nat")
    assert code == 1 and "not found" in err and "native anchor" in err
    assert (
        devcluster.core.list_namespaced_config_map(
            cluster_namespace, label_selector="jobset-core/anchor=native"
        ).items
        == []
    )


def test_killed_run_is_reattached_without_duplicate_or_orphan(
    devcluster: Any, cluster_namespace: str, tmp_path: Path
) -> None:
    path = write(tmp_path, "survivor", rjob("w", 2, **{"devcluster/run-seconds": "4"}))
    command = [
        sys.executable,
        "-m",
        "jobset_core.cli",
        "run",
        str(path),
        "-n",
        cluster_namespace,
        "--backend",
        "controller",
    ]
    env = dict(devcluster.env, PYTHONPATH=str(ROOT))
    first = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT
    )
    assert first.stdout is not None
    created = first.stdout.readline().decode()
    assert created.startswith("created: "), created
    devcluster.wait_for(
        lambda: len(devcluster.core.list_namespaced_pod(cluster_namespace).items) == 2,
        60,
        desc="pods started",
    )
    os.kill(first.pid, signal.SIGKILL)
    first.wait(10)
    first.stdout.close()
    assert first.stderr is not None
    first.stderr.close()
    assert first.returncode == -signal.SIGKILL
    second = subprocess.run(
        command, check=False, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120
    )
    assert second.returncode == 0, second.stderr
    assert second.stdout.startswith("adopted: ")
    uid = created.split("uid=")[1].split()[0]
    assert f"uid={uid}" in second.stdout.splitlines()[0]
    jobsets = devcluster.custom.list_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", cluster_namespace, "jobsets"
    )["items"]
    assert [j["metadata"]["uid"] for j in jobsets] == [uid]
    jobs = devcluster.batch.list_namespaced_job(cluster_namespace).items
    assert sorted(j.metadata.name for j in jobs) == ["survivor-w-0", "survivor-w-1"]
    assert all(j.metadata.owner_references[0].uid == uid for j in jobs)
