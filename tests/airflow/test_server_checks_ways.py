"""Every way that creates a run asks the target cluster first: a JobSet whose pods the
namespace's Pod Security refuses fails the operator (worker and deferrable: the deferrable
mode submits in the worker before it defers), its ``dry_run()``, the KFP launcher and
``jobsetctl run`` before anything exists, naming the file, the JobSet's field path and the
plugin. (The core's cases and ``jobsetctl validate --server``: tests/core/test_server_checks.py.)"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.core.test_server_checks import POD, guarded, nothing_exists, privileged, spoiled

pytestmark = [pytest.mark.cluster, pytest.mark.airflow]

ROOT = Path(__file__).resolve().parents[2]
KFP_PYTHON = ROOT / ".venv" / "kfp" / "bin" / "python"
REFUSED = f'{POD.format(i=1)}: PodSecurity "restricted:latest" refuses the pods of'


@pytest.fixture
def guarded_file(devcluster: Any, cluster_namespace: str, tmp_path: Path) -> Path:
    guarded(devcluster, cluster_namespace)
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(spoiled("ways", privileged)))
    return path


class _TI:
    dag_id, task_id, map_index, try_number, start_date = "ways", "train", -1, 1, None
    run_id = "manual__1"

    def xcom_push(self, key: str, value: Any) -> None:
        pass


@pytest.mark.parametrize("deferrable", [False, True], ids=["worker", "deferrable"])
def test_the_operator_fails_without_a_retry_before_anything_exists(
    devcluster: Any, cluster_namespace: str, kube_conn: str, guarded_file: Path, deferrable: bool
) -> None:
    from airflow_provider_jobset._compat import AirflowFailException
    from airflow_provider_jobset.operators import JobSetOperator

    op = JobSetOperator(
        task_id="train",
        jobset=str(guarded_file),
        namespace=cluster_namespace,
        deferrable=deferrable,
    )
    with pytest.raises(AirflowFailException) as caught:  # never retried
        op.execute({"ti": _TI()})
    said = str(caught.value)
    assert "nothing was created" in said and f"{guarded_file}: {REFUSED}" in said, said
    nothing_exists(devcluster, cluster_namespace)


def test_the_operators_dry_run_asks_the_cluster(
    devcluster: Any, cluster_namespace: str, kube_conn: str, guarded_file: Path
) -> None:
    from airflow_provider_jobset._compat import AirflowFailException
    from airflow_provider_jobset.operators import JobSetOperator

    op = JobSetOperator(task_id="train", jobset=str(guarded_file), namespace=cluster_namespace)
    with pytest.raises(AirflowFailException) as caught:
        op.dry_run()
    assert f"{guarded_file}: {REFUSED}" in str(caught.value)
    nothing_exists(devcluster, cluster_namespace)


def test_the_kfp_launcher_exits_invalid_before_anything_exists(
    devcluster: Any, cluster_namespace: str, guarded_file: Path
) -> None:
    command = [
        str(KFP_PYTHON), "-m", "kfp_components.launcher", "launch",
        "--jobset", str(guarded_file), "--namespace", cluster_namespace,
        "--run-id", "r1", "--task-name", "train", "--task-id", "1",
    ]  # fmt: skip
    done = subprocess.run(
        command,
        cwd=ROOT,
        env={"KUBECONFIG": str(devcluster.kubeconfig), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    from kfp_components.launcher import EXIT_INVALID

    assert done.returncode == EXIT_INVALID, done
    assert REFUSED in done.stdout + done.stderr, done
    nothing_exists(devcluster, cluster_namespace)
