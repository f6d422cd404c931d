"""Pure decisions of the launch step: exit codes and outputs (the delete policy is the core's,
tested in tests/core/test_lifecycle_verdict.py)."""

from __future__ import annotations

from typing import Any

import pytest

from jobset_core.errors import (
    ApiError,
    ConfigError,
    CreationFailed,
    Forbidden,
    IdentityMismatch,
    JobSetFailed,
    JobSetGone,
    NotFound,
    SpecError,
    WaitTimeout,
)
from jobset_core.lifecycle import Handle, Verdict
from jobset_core.outcome import Outcome, Phase
from kfp_components import launcher
from kfp_components._launch import LaunchResult, Terminated
from kfp_components._struct import from_struct
from tests.kfp._inputs import GOOD_INPUTS

pytestmark = pytest.mark.kfp

_FAILED = Outcome(
    name="t",
    namespace="n",
    backend="native",
    phase=Phase.FAILED,
    terminal_state="Failed",
    reason="FailedJobs",
    message="jobset failed (first failed job: t-w-0)",
    failed_job="t-w-0",
)


def ended(kind: str, outcome: Outcome | None = None, message: str = "") -> Verdict:
    return Verdict(
        kind=kind,  # type: ignore[arg-type]
        name="t",
        namespace="n",
        backend="native",
        outcome=outcome,
        message=message,
    )


@pytest.mark.parametrize(
    ("error", "code"),
    [
        pytest.param(JobSetFailed(ended("failed", _FAILED)), launcher.EXIT_FAILED, id="failed"),
        pytest.param(WaitTimeout(ended("timeout")), launcher.EXIT_TIMEOUT, id="timeout"),
        pytest.param(CreationFailed(ended("creation_failed")), 3, id="creation"),
        pytest.param(JobSetGone(ended("gone")), launcher.EXIT_GONE, id="deleted-meanwhile"),
        pytest.param(SpecError([]), launcher.EXIT_INVALID, id="spec"),
        pytest.param(ConfigError("no kubeconfig"), launcher.EXIT_INVALID, id="config"),
        pytest.param(IdentityMismatch("JobSet", "n", "t", "labels"), 4, id="not-ours"),
        pytest.param(Forbidden(403, "Forbidden"), launcher.EXIT_API_ERROR, id="forbidden"),
        pytest.param(NotFound(404, "NotFound"), launcher.EXIT_API_ERROR, id="not-found"),
        pytest.param(ApiError(500), launcher.EXIT_API_ERROR, id="server"),
        pytest.param(Terminated(Handle("t", "n", "u", "controller")), 143, id="sigterm"),
        pytest.param(RuntimeError("bug"), None, id="unexpected-propagates"),
    ],
)
def test_exit_code(error: BaseException, code: int | None) -> None:
    assert launcher.exit_code(error) == code


def test_failed_message_is_the_verdicts() -> None:
    verdict = ended("failed", _FAILED, "JobSet n/t failed: FailedJobs (failed child Job: t-w-0)")
    error = JobSetFailed(verdict)
    assert str(error) == verdict.message and error.verdict.outcome == _FAILED


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param({"accuracy": 0.9}, {"accuracy": 0.9}, id="object"),
        pytest.param(0.9, {"value": 0.9}, id="number-wrapped"),
        pytest.param("done", {"value": "done"}, id="text-wrapped"),
        pytest.param([1, 2], {"value": [1, 2]}, id="list-wrapped"),
        pytest.param(None, {}, id="no-message"),
    ],
)
def test_outputs_result(value: Any, expected: dict[str, Any]) -> None:
    outcome = Outcome(
        name="t",
        namespace="n",
        uid="u",
        backend="controller",
        phase=Phase.COMPLETED,
        terminal_state="Completed",
        restarts=1,
        result=value,
    )
    outputs = launcher.launch_outputs(LaunchResult(outcome, created=True))
    assert outputs.result == expected
    assert outputs[:4] == ("t", "u", "Completed", 1)


def _launch(**given: Any) -> Any:
    """``launch_step`` with inputs that pass every check, and the identity KFP resolves."""
    identity = {"task_config": None, "run_id": "r", "task_name": "t", "task_id": "1"}
    return launcher.launch_step(**{**GOOD_INPUTS, **identity, "metrics": None, **given})


def test_step_rejects_both_or_no_jobset(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        _launch(jobset="", jobset_dict=None)
    assert caught.value.code == launcher.EXIT_INVALID
    assert "exactly one of jobset" in capsys.readouterr().err


def test_step_refuses_a_field_newer_than_the_models_as_a_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The launcher cannot carry such a field: the core's words for every way of running,
    with the input's name, never the Python API's ``allow_unknown_fields=True``."""
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "x"},
        "spec": {"fromTheFuture": 1, "replicatedJobs": []},
    }
    with pytest.raises(SystemExit) as caught:
        _launch(jobset="", jobset_dict=jobset)
    assert caught.value.code == launcher.EXIT_INVALID
    said = capsys.readouterr().err
    assert "launch_jobset(jobset_dict): spec.fromTheFuture: unknown field" in said, said
    assert "remove it to run the JobSet" in said and "allow_unknown_fields" not in said, said


def test_step_rejects_unresolved_identity(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        launcher.cleanup_step(namespace="n", run_id="{{$.pipeline_job_uuid}}", backend="auto")
    assert caught.value.code == launcher.EXIT_INVALID
    assert "PIPELINE_JOB_ID_PLACEHOLDER" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param({"replicas": 2.0}, {"replicas": 2}, id="whole-number"),
        pytest.param({"cpu": 0.5}, {"cpu": 0.5}, id="fraction-kept"),
        pytest.param([{"a": [1.0, "x", True]}], [{"a": [1, "x", True]}], id="nested"),
        pytest.param("2.0", "2.0", id="string-untouched"),
    ],
)
def test_from_struct(value: Any, expected: Any) -> None:
    result = from_struct(value)
    assert result == expected
    assert [type(x) for x in _leaves(result)] == [type(x) for x in _leaves(expected)]


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


_GOOD_INPUTS = GOOD_INPUTS


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"namespace": "BAD NS!"}, "namespace: 'BAD NS!' is not a valid namespace name"),
        ({"namespace": 3}, "namespace: must be a string"),
        (
            {"backend": "kubeflow"},
            "backend: must be one of 'auto', 'controller', 'native', not 'kubeflow'",
        ),
        ({"timeout_seconds": -1}, "timeout_seconds: must be 0 or more, not -1"),
        ({"timeout_seconds": float("inf")}, "timeout_seconds: must be 0 or more, not inf"),
        ({"timeout_seconds": True}, "timeout_seconds: must be a number of seconds"),
        ({"delete_policy": "sometimes"}, "delete_policy: must be one of 'never'"),
        ({"follow_logs": "no"}, "follow_logs: must be True or False"),
        ({"log_replicated_job": None}, "log_replicated_job: must be a string"),
        ({"log_job_index": -1}, "log_job_index: must be >= 0"),
        ({"log_pod_index": "x"}, "log_pod_index: must be an int >= 0"),
        ({"jobset": 42}, "jobset: must be YAML or JSON text"),
        ({"jobset_dict": [1]}, "jobset_dict: must be a dict"),
        ({"task_config_replicated_jobs": "w"}, "task_config_replicated_jobs: must be a list"),
    ],
)
def test_launch_inputs_are_checked_before_anything_is_created(
    change: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(SpecError) as raised:
        launcher.check_launch_inputs(**{**_GOOD_INPUTS, **change})
    assert f"launch_jobset: {fragment}" in str(raised.value)


def test_good_launch_inputs_pass() -> None:
    launcher.check_launch_inputs(**_GOOD_INPUTS)
    launcher.check_launch_inputs(
        **{**_GOOD_INPUTS, "namespace": "team-a", "timeout_seconds": 1.5, "log_job_index": 3}
    )


def test_cleanup_rejects_a_bad_namespace(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        launcher.cleanup_step(namespace="BAD NS!", run_id="r", backend="auto")
    assert caught.value.code == launcher.EXIT_INVALID
    assert "'BAD NS!' is not a valid namespace name" in capsys.readouterr().err


def test_command_line_jobset_file_that_is_not_utf8(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "js.yaml"
    path.write_bytes(b"kind: \xff\n")
    with pytest.raises(SystemExit) as caught:
        launcher.main(
            ["launch", "--jobset", str(path), "--run-id", "r", "--task-name", "t", "--task-id", "1"]
        )
    assert caught.value.code == launcher.EXIT_INVALID
    assert f"{path}: not UTF-8 text (byte 6)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("change", "input_name"),
    [
        ({"log_pods": "leader"}, "log_pods"),
        ({"log_container": "Bad_Name"}, "log_container"),
        ({"log_max_pods": 0}, "log_max_pods"),
        ({"log_max_bytes": -1}, "log_max_bytes"),
        ({"start_grace_seconds": -2}, "start_grace_seconds"),
        ({"pending_timeout_seconds": float("nan")}, "pending_timeout_seconds"),
        ({"crash_loop_restarts": -1}, "crash_loop_restarts"),
        ({"inject_env": "yes"}, "inject_env"),
    ],
)
def test_wait_inputs_name_a_bad_input(change: dict[str, Any], input_name: str) -> None:
    from jobset_core.errors import SpecError
    from jobset_core.lifecycle import LogTarget

    wait = launcher.WaitInputs(**change)
    with pytest.raises(SpecError) as raised:
        wait.pod_start()
        wait.logs(LogTarget())
        wait.checked_inject_env()
    assert raised.value.problems[0].path == input_name


def test_wait_inputs_defaults_and_never() -> None:
    from jobset_core.lifecycle import LogOptions, LogTarget
    from jobset_core.policy.pod_start import PodStartRules

    assert launcher.WaitInputs().pod_start() == PodStartRules()
    never = launcher.WaitInputs(start_grace_seconds=-1, crash_loop_restarts=3)
    assert never.pod_start() == PodStartRules(grace=None, crash_loop_restarts=3)
    options = launcher.WaitInputs(log_pods="all", log_max_bytes=0).logs(LogTarget("w"))
    assert options == LogOptions(pods="all", target=LogTarget("w"), max_bytes=None)
