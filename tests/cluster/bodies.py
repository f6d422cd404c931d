"""JobSet bodies for the cluster tests (plain API data): a replicated job of pods that the
devcluster's pod annotations script (``tests/cluster/README.md``), and the JobSet around them."""

from __future__ import annotations

from typing import Any

from tests.cluster.localcluster.controlplane import TURN_TAINT

__all__ = ["finish_at", "in_turn", "jobset", "replicated_job"]


def in_turn(rjob: dict[str, Any]) -> dict[str, Any]:
    """``rjob`` (a replicated job; its pod template gets a new spec) with pods that may also
    land on the exclusive-placement turn's nodes (they tolerate the nodes' taint;
    tests/cluster/README.md): for a test that holds the turn (the ``exclusive_placement``
    fixture), whose exclusively placed Jobs then always find free domains, however busy the
    other nodes are. On a cluster without those nodes the toleration changes nothing."""
    template = rjob["template"]["spec"]["template"]
    pod = template.get("spec") or {}
    tolerations = [*(pod.get("tolerations") or []), {**TURN_TAINT, "operator": "Equal"}]
    template["spec"] = {**pod, "tolerations": tolerations}  # a shared spec stays as it was
    return rjob


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
