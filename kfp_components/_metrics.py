"""The numbers a launch step reports as a KFP ``Metrics`` artifact (pure).

Per replicated job: the child-Job counts of the last attempt (replicas, succeeded, failed,
ready, active) and how long its Jobs ran (first ``status.startTime`` to the last Job's end);
for the whole run: restarts and the JobSet's duration (creation to terminal condition).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Mapping
from typing import Any

from jobset_core import labels
from jobset_core.outcome import Outcome

__all__ = ["metric_values", "replicated_job_durations"]


def _time(value: Any) -> _dt.datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _end(status: Mapping[str, Any]) -> _dt.datetime | None:
    end = _time(status.get("completionTime"))
    if end is not None:
        return end
    for condition in status.get("conditions") or []:
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            return _time(condition.get("lastTransitionTime"))
    return None


def replicated_job_durations(jobs: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Seconds from the first Job's start to the last Job's end, per replicated job.

    Only replicated jobs whose every listed Job has ended are timed; Jobs are grouped by the
    ``jobset.sigs.k8s.io/replicatedjob-name`` label.
    """
    spans: dict[str, list[tuple[_dt.datetime | None, _dt.datetime | None]]] = {}
    for job in jobs:
        meta = job.get("metadata") or {}
        name = (meta.get("labels") or {}).get(labels.REPLICATED_JOB_NAME)
        if not name:
            continue
        status = job.get("status") or {}
        spans.setdefault(name, []).append((_time(status.get("startTime")), _end(status)))
    out: dict[str, float] = {}
    for name, items in spans.items():
        starts = [start for start, _ in items]
        ends = [end for _, end in items]
        if any(s is None for s in starts) or any(e is None for e in ends):
            continue
        begin = min(s for s in starts if s is not None)
        finish = max(e for e in ends if e is not None)
        out[name] = max(0.0, (finish - begin).total_seconds())
    return out


def metric_values(outcome: Outcome, durations: Mapping[str, float]) -> dict[str, float]:
    """The metrics of a finished run, by name (``<replicated job>.<count>`` per replicated job)."""
    out: dict[str, float] = {"restarts": float(outcome.restarts)}
    if outcome.duration_seconds is not None:
        out["duration_seconds"] = float(outcome.duration_seconds)
    for counts in outcome.replicated_jobs:
        for key in ("replicas", "succeeded", "failed", "ready", "active"):
            out[f"{counts.name}.{key}"] = float(getattr(counts, key))
        if counts.name in durations:
            out[f"{counts.name}.duration_seconds"] = float(durations[counts.name])
    return out
