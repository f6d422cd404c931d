"""Results: the kubelet's 4 KiB termination-message limit, and results that are not JSON."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jobset_core import labels as L
from jobset_core.lifecycle import ClientSettings, Deadline, RunRequest, session
from jobset_core.lifecycle._judge import result_note
from jobset_core.models import JobSet
from jobset_core.outcome import MAX_RESULT_BYTES, result_problem

JOBSET = JobSet.model_validate(
    {
        "metadata": {"name": "r"},
        "spec": {
            "replicatedJobs": [{"name": "w", "template": {"spec": {"template": {"spec": {}}}}}]
        },
    }
)


def _pod(message: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "r-w-0-0-x",
            "labels": {L.REPLICATED_JOB_NAME: "w", L.JOB_INDEX: "0"},
            "annotations": {L.JOB_COMPLETION_INDEX: "0"},
        },
        "spec": {"containers": [{"name": "main"}]},
        "status": {
            "containerStatuses": [
                {"name": "main", "state": {"terminated": {"exitCode": 0, "message": message}}}
            ]
        },
    }


@pytest.mark.parametrize(
    ("message", "fragment"),
    [
        pytest.param("", "", id="none"),
        pytest.param('{"loss": 0.1}', "", id="json"),
        pytest.param("done", "is not JSON: it is returned as text (4 bytes)", id="text"),
        pytest.param(
            "x" * MAX_RESULT_BYTES + '"}',
            "the kubelet's limit of 4096: the kubelet kept only its last 4096 bytes, which are "
            "not valid JSON",
            id="cut",
        ),
        pytest.param(
            json.dumps({"a": "x" * MAX_RESULT_BYTES}),
            "a longer result would have been cut",
            id="at-the-limit",
        ),
    ],
)
def test_what_is_wrong_with_a_result(message: str, fragment: str) -> None:
    problem = result_problem(message, "main")
    if not fragment:
        assert problem == ""
        assert result_note(JOBSET, [_pod(message)]) == ""
    else:
        assert fragment in problem and "container main's termination message" in problem
        assert result_note(JOBSET, [_pod(message)]) == f"; pod r-w-0-0-x: {problem}"


@pytest.mark.cluster
@pytest.mark.parametrize("backend", ["controller", "native"])
async def test_a_result_that_is_not_json_is_said_in_the_verdict(
    backend: str, devcluster: Any, cluster_namespace: str
) -> None:
    notes = {"devcluster/termination-message": "accuracy=0.93", "devcluster/run-seconds": "1"}
    js = JobSet.model_validate(
        {
            "metadata": {"name": "textresult"},
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "w",
                        "template": {
                            "spec": {
                                "template": {
                                    "metadata": {"annotations": notes},
                                    "spec": {
                                        "restartPolicy": "Never",
                                        "containers": [{"name": "main", "image": "busybox"}],
                                    },
                                }
                            }
                        },
                    }
                ]
            },
        }
    )
    request = RunRequest(
        jobset=js, namespace=cluster_namespace, backend=backend, deadline=Deadline(timeout=90)
    )
    async with session(ClientSettings(kubeconfig_path=str(devcluster.kubeconfig))) as lifecycle:
        finished = await lifecycle.execute(request)
    verdict = finished.verdict
    assert verdict.kind == "completed" and verdict.result == "accuracy=0.93", verdict
    assert "completed (AllJobsCompleted); pod textresult-w-0-0-" in verdict.message
    assert verdict.message.endswith(
        ": the result (container main's termination message) is not JSON: it is returned as "
        "text (13 bytes)"
    ), verdict.message
