"""The Airflow version switches of ``_compat`` take the right path on the installed Airflow.

Run on every minor of the matrix (``airflow_matrix``): 3.0 to 3.2 have no task state store, no
trigger ``on_kill`` and no retry policies, and some imports live elsewhere; 3.3 has all of it.
The cluster tests of the same marker prove the behaviour on each minor (a restart becomes a
retry that reattaches by name and identity labels alone before 3.3).
"""

from __future__ import annotations

import pytest
from airflow import __version__
from packaging.version import Version

from airflow_provider_jobset import _compat
from airflow_provider_jobset.operators import JobSetOperator, default_retry_policy

pytestmark = [pytest.mark.airflow, pytest.mark.airflow_matrix]

V33 = Version(Version(__version__).base_version) >= Version("3.3")
JOBSET = {
    "apiVersion": "jobset.x-k8s.io/v1alpha2",
    "kind": "JobSet",
    "metadata": {"name": "compat"},
    "spec": {
        "failurePolicy": {"maxRestarts": 2},
        "replicatedJobs": [
            {
                "name": "w",
                "template": {
                    "spec": {
                        "template": {
                            "spec": {
                                "restartPolicy": "Never",
                                "containers": [{"name": "c", "image": "busybox"}],
                            }
                        }
                    }
                },
            }
        ],
    },
}


def test_version_switch_matches_the_installed_airflow() -> None:
    assert _compat.AIRFLOW_V_3_3_PLUS is V33


def test_retry_policy_only_where_airflow_has_them() -> None:
    op = JobSetOperator(task_id="t", jobset=JOBSET)
    assert op.retries == 2, "retries mirror maxRestarts on every minor"
    if V33:
        assert default_retry_policy() is not None
        assert op.retry_policy is not None
    else:
        assert default_retry_policy() is None
        assert getattr(op, "retry_policy", None) is None
        with pytest.raises(ImportError):
            from airflow.sdk import ExceptionRetryPolicy  # noqa: F401


@pytest.mark.airflow_min("3.3")
@pytest.mark.parametrize(
    ("error", "action"),
    [
        ("JobSetRestarting", "retry"),
        ("JobSetPreempted", "retry"),
        ("QueueRefused", "fail"),
        ("PodsRefused", "fail"),
        ("PodsCannotStart", "fail"),
        ("JobSetFailed", "fail"),
    ],
)
def test_the_retry_policy_fails_what_a_new_try_would_meet_again(error: str, action: str) -> None:
    from jobset_core import errors

    cls = getattr(errors, error)
    instance = cls.__new__(cls)  # the policy goes by the class alone (no verdict needed)
    Exception.__init__(instance, error)
    decision = default_retry_policy().evaluate(instance, try_number=1, max_tries=5)
    assert str(getattr(decision.action, "value", decision.action)).lower() == action, decision


def test_task_state_store_falls_back_to_none() -> None:
    # A context without the store (Airflow < 3.3, or a hand-made context) means: reattach by
    # name and identity labels only.
    assert _compat.task_state_store({}) is None
    assert _compat.task_state_store(object()) is None
    store = object()
    assert _compat.task_state_store({"task_state_store": store}) is store


def test_trigger_on_kill_exists_only_from_3_3() -> None:
    # Before 3.3 Airflow never calls a trigger's on_kill: killing a deferred task leaves its
    # JobSet running (docs/concepts/retries.md says so).
    assert hasattr(_compat.BaseTrigger, "on_kill") is V33


def test_exceptions_are_the_ones_airflow_acts_on() -> None:
    # The task runner fails without retry on AirflowFailException: what the operator raises
    # for an error never retried (wrapping the core's) must be that class, on every minor.
    try:
        from airflow.sdk.exceptions import AirflowFailException
    except ImportError:
        from airflow.exceptions import AirflowFailException
    from airflow_provider_jobset.exceptions import NEVER_RETRIED, JobSetFailed

    assert _compat.AirflowFailException is AirflowFailException
    assert JobSetFailed in NEVER_RETRIED
    assert not issubclass(JobSetFailed, AirflowFailException)  # the core knows no Airflow


class _TI:
    task_id = "t"

    def __init__(self, try_number: int, deferred_in: int | None) -> None:
        self.try_number = try_number
        self.deferred_in = deferred_in

    def xcom_pull(self, task_ids: str, key: str) -> int | None:
        assert (task_ids, key) == ("t", _compat.DEFERRED_IN_TRY)
        return self.deferred_in


def test_a_retry_never_resumes_the_earlier_tries_event(monkeypatch: pytest.MonkeyPatch) -> None:
    # Airflow 3.0 hands a retried task the trigger event of the try before it
    # (apache/airflow#56704); the operator must then run execute (and reattach) instead.
    op = JobSetOperator(task_id="t", jobset=JOBSET)
    calls: list[str] = []
    monkeypatch.setattr(op, "execute", lambda context: calls.append("execute"))
    monkeypatch.setattr(
        op, "execute_complete", lambda context, event=None: calls.append("execute_complete")
    )
    if not _compat.STALE_RESUME_ON_RETRY:
        assert _compat.BaseOperator.__module__.startswith("airflow.")
        return
    op.resume_execution("execute_complete", {"event": {}}, {"ti": _TI(2, deferred_in=1)})
    op.resume_execution("execute_complete", {"event": {}}, {"ti": _TI(2, deferred_in=2)})
    assert calls == ["execute", "execute_complete"]
