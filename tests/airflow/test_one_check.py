"""The same argument given to two ways in is checked by the same code and refused with the same
words: the operator (``JobSetOperator(arg=...): <words>``), the KFP launcher (``<input>: <words>``)
and ``jobsetctl`` (``argument --flag: <words>``) all say what the core's one check says
(:mod:`jobset_core.lifecycle.request`)."""

from __future__ import annotations

import io
from typing import Any

import pytest

from airflow_provider_jobset.operators import JobSetOperator
from jobset_core import cli, leader_workers
from jobset_core.errors import SpecError
from kfp_components import launcher
from tests.kfp._inputs import GOOD_INPUTS

pytestmark = pytest.mark.airflow


def _operator(**arguments: Any) -> str:
    js = leader_workers("lw", "busybox", workers=1, leader_command=["x"], worker_command=["x"])
    with pytest.raises((TypeError, ValueError)) as raised:
        JobSetOperator(task_id="t", jobset=js, **arguments)
    text = str(raised.value)
    assert text.startswith("JobSetOperator("), text
    return text.split("): ", 1)[1]


def _kfp(**inputs: Any) -> str:
    wait = launcher.WaitInputs(**inputs)
    with pytest.raises(SpecError) as raised:
        wait.pod_start()
        wait.logs(launcher.LogTarget())
        wait.queue_fields()
        wait.admission_timeout()
    (problem,) = raised.value.problems
    return problem.message


def _cli(*flags: str) -> str:
    err = io.StringIO()
    assert cli.main(["run", "x.yaml", *flags], stdout=io.StringIO(), stderr=err) == 2
    line = next(ln for ln in err.getvalue().splitlines() if "error: argument" in ln)
    return line.split(": ", 3)[3]


@pytest.mark.parametrize(
    ("operator", "kfp", "flags", "words"),
    [
        ({"start_grace": -5}, {"start_grace_seconds": -5}, ("--start-grace", "-5"), "0 or more"),
        ({"log_max_pods": 0}, {"log_max_pods": 0}, ("--log-max-pods", "0"), ">= 1, not 0"),
        (
            {"log_pods": "leader"},
            {"log_pods": "leader"},
            ("--log-pods", "leader"),
            "is neither one of coordinator",
        ),
        (
            {"log_container": "Bad_Name"},
            {"log_container": "Bad_Name"},
            ("--log-container", "Bad_Name"),
            "not a container name",
        ),
        (
            {"queue": "Team_Queue"},
            {"queue": "Team_Queue"},
            ("--queue", "Team_Queue"),
            "a lowercase RFC 1123 label",
        ),
        (
            {"admission_timeout": -1},
            {"admission_timeout_seconds": -1},
            ("--admission-timeout", "-1"),
            "must be positive, not -1",
        ),
    ],
    ids=["start-grace", "log-max-pods", "log-pods", "log-container", "queue", "admission"],
)
def test_one_check_one_message(
    operator: dict[str, Any], kfp: dict[str, Any], flags: tuple[str, ...], words: str
) -> None:
    said = {"operator": _operator(**operator), "kfp": _kfp(**kfp), "cli": _cli(*flags)}
    assert words in said["operator"], said
    assert len(set(said.values())) == 1, said


def test_the_namespace_is_refused_alike() -> None:
    operator = _operator(namespace="BAD NS!")
    with pytest.raises(SpecError) as raised:
        launcher.check_launch_inputs(
            **{**GOOD_INPUTS, "namespace": "BAD NS!"},
        )
    kfp = raised.value.problems[0].message
    err = io.StringIO()
    assert cli.main(["run", "x.yaml", "-n", "BAD NS!"], stdout=io.StringIO(), stderr=err) == 2
    flag = err.getvalue().split("argument -n/--namespace: ", 1)[1].strip()
    assert operator == kfp == flag, (operator, kfp, flag)
