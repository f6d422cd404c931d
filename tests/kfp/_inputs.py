"""Inputs of ``launch_jobset`` that pass every check (tests change one at a time)."""

from __future__ import annotations

from typing import Any

GOOD_INPUTS: dict[str, Any] = {
    "jobset": "kind: JobSet",
    "jobset_dict": None,
    "namespace": "",
    "backend": "auto",
    "timeout_seconds": 0,
    "delete_policy": "on_timeout",
    "follow_logs": False,
    "log_replicated_job": "",
    "log_job_index": 0,
    "log_pod_index": 0,
    "task_config_replicated_jobs": None,
}
