"""The launch step's flow over a scripted backend (the backend protocol is the seam; how the
real backends behave on a cluster is tested in test_kfp_cluster.py)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from jobset_core.backends import Handle, Submission
from jobset_core.errors import Forbidden, WaitTimeout
from jobset_core.models import JobSet, load_jobset
from jobset_core.outcome import Outcome, Phase
from kfp_components._identity import kfp_identity
from kfp_components._launch import JobSetFailed, LaunchRequest, launch
from kfp_components._signals import Terminated
from tests.kfp.conftest import make_jobset

pytestmark = pytest.mark.kfp

IDENTITY = kfp_identity("run", "train", "1")


def _outcome(state: str | None, **extra: Any) -> Outcome:
    phase = {"Completed": Phase.COMPLETED, "Failed": Phase.FAILED, None: Phase.RUNNING}[state]
    return Outcome(
        name="train-x",
        namespace="ns",
        uid="u1",
        backend="controller",
        phase=phase,
        terminal_state=state,
        **extra,
    )


class ScriptedBackend:
    """Answers like a backend would; records what the launch step asked for."""

    kind = "controller"

    def __init__(
        self,
        wait: Outcome | BaseException | str,
        *,
        created: bool = True,
        delete_error: Exception | None = None,
        logs_error: Exception | None = None,
    ) -> None:
        self._wait, self._created = wait, created
        self._delete_error, self._logs_error = delete_error, logs_error
        self.submitted: list[JobSet] = []
        self.deleted: list[Handle] = []
        self.cancelled: list[Handle] = []

    def submit(
        self,
        jobset: JobSet,
        *,
        namespace: str,
        identity: Mapping[str, str] | None = None,
        expected_uid: str | None = None,
    ) -> Submission:
        self.submitted.append(jobset)
        return Submission(Handle("train-x", namespace, "u1", "controller"), self._created)

    def wait(self, handle: Handle, **_: Any) -> Outcome:
        if self._wait == "sigterm":
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # interrupted by the handler
            raise AssertionError("SIGTERM did not end the wait")
        if isinstance(self._wait, BaseException):
            raise self._wait
        assert isinstance(self._wait, Outcome)
        return self._wait

    def delete(self, handle: Handle, **_: Any) -> None:
        self.deleted.append(handle)
        if self._delete_error:
            raise self._delete_error

    def cancel(self, handle: Handle) -> None:
        self.cancelled.append(handle)

    def failed_pod_logs(self, handle: Handle, **_: Any) -> dict[str, str]:
        if self._logs_error:
            raise self._logs_error
        return {"train-x-workers-0-0-abc": "Traceback ...\nCUDA error"}

    def stream_logs(self, handle: Handle, **_: Any) -> Iterator[str]:
        yield from ()


def _run(backend: ScriptedBackend, policy: str = "on_timeout") -> tuple[Any, list[str]]:
    said: list[str] = []
    request = LaunchRequest(
        jobset=load_jobset(make_jobset("train")),
        namespace="ns",
        identity=IDENTITY,
        timeout=10,
        delete_policy=policy,  # type: ignore[arg-type]
    )
    return launch(request, backend, say=said.append), said  # type: ignore[arg-type]


def test_completed_returns_the_outcome_and_submits_under_the_derived_name() -> None:
    backend = ScriptedBackend(_outcome("Completed", result={"a": 1}))
    result, said = _run(backend)
    assert result.outcome.result == {"a": 1}
    assert result.created and not result.deleted
    assert backend.deleted == []
    submitted = backend.submitted[0]
    assert submitted.metadata.name is None
    assert submitted.metadata.generate_name == "train-"
    assert said[0] == "JobSet ns/train-x created; uid u1; controller"


def test_adoption_is_reported() -> None:
    _, said = _run(ScriptedBackend(_outcome("Completed"), created=False))
    assert "adopted (an earlier attempt created it)" in said[0]


@pytest.mark.parametrize(
    ("policy", "deleted"),
    [("never", False), ("on_timeout", False), ("on_success", True), ("always", True)],
)
def test_completed_deleted_by_policy(policy: str, deleted: bool) -> None:
    backend = ScriptedBackend(_outcome("Completed"))
    result, _ = _run(backend, policy)
    assert result.deleted is deleted
    assert bool(backend.deleted) is deleted


@pytest.mark.parametrize(("policy", "deleted"), [("on_success", False), ("always", True)])
def test_failed_raises_with_pod_logs(policy: str, deleted: bool) -> None:
    backend = ScriptedBackend(_outcome("Failed", reason="FailedJobs"))
    with pytest.raises(JobSetFailed) as caught:
        _run(backend, policy)
    assert "CUDA error" in caught.value.pod_logs["train-x-workers-0-0-abc"]
    assert bool(backend.deleted) is deleted


@pytest.mark.parametrize(("policy", "deleted"), [("never", False), ("on_timeout", True)])
def test_timeout_deletes_unless_never(policy: str, deleted: bool) -> None:
    backend = ScriptedBackend(WaitTimeout("ns", "train-x", 10))
    with pytest.raises(WaitTimeout):
        _run(backend, policy)
    assert bool(backend.deleted) is deleted


def test_unreadable_logs_do_not_hide_the_failure() -> None:
    backend = ScriptedBackend(_outcome("Failed"), logs_error=Forbidden(403, "Forbidden"))
    with pytest.raises(JobSetFailed):
        _run(backend)


def test_failed_delete_does_not_hide_the_outcome() -> None:
    backend = ScriptedBackend(_outcome("Completed"), delete_error=Forbidden(403, "Forbidden"))
    result, said = _run(backend, "always")
    assert not result.deleted
    assert any(line.startswith("could not delete JobSet ns/train-x") for line in said)


def test_sigterm_cancels_once_and_stops() -> None:
    before = signal.getsignal(signal.SIGTERM)
    backend = ScriptedBackend("sigterm")
    with pytest.raises(Terminated, match="DELETE sent"):
        _run(backend)
    assert [h.name for h in backend.cancelled] == ["train-x"]
    assert backend.deleted == []
    assert signal.getsignal(signal.SIGTERM) is before
