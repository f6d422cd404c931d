"""JobSet bodies for the cluster tests (plain API data): a replicated job of pods that the
devcluster's pod annotations script (``tests/cluster/README.md``), and the JobSet around them."""

from __future__ import annotations

from typing import Any

__all__ = ["finish_at", "jobset", "replicated_job"]


def replicated_job(
    name: str,
    replicas: int = 1,
    parallelism: int = 1,
    annotations: dict[str, str] | None = None,
    backoff_limit: int = 0,
) -> dict[str, Any]:
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {
                "parallelism": parallelism,
                "completions": parallelism,
                "backoffLimit": backoff_limit,
                "template": {
                    "metadata": {"annotations": dict(annotations or {})},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "main", "image": "registry.invalid/worker:1"}],
                    },
                },
            }
        },
    }


def jobset(name: str, *rjobs: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": {"replicatedJobs": list(rjobs), **spec},
    }


def finish_at(seconds: float) -> str:
    """A ``devcluster/finish-at`` moment ``seconds`` from now: pods given it exit together
    then, however late each was scheduled (exclusive placement holds between pods that
    exist at the same time, so a test of it needs them to overlap on a loaded machine)."""
    import datetime as dt

    moment = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
