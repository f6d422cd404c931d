"""Exclusive placement: one child Job per topology domain.

Upstream implements it in two ways, both keyed on the ``exclusive-topology`` annotation:

* **node-selector strategy** (``alpha.jobset.sigs.k8s.io/node-selector`` also set): the
  controller adds ``nodeSelector {namespaced-job: <ns>_<job>}`` and a toleration of the
  ``no-schedule`` taint to the pod template; nodes are labelled and tainted beforehand.
  Rendered the same way in every placement mode (:func:`add_node_selector_strategy`).
* **pod webhook** (default): at pod creation, the leader pod (completion index 0) gets a required
  podAffinity on its own ``job-key`` and a required podAntiAffinity against pods of other
  ``job-key`` values of the same priority, both on the topology key in all namespaces;
  followers get a nodeSelector copied from the domain of the leader's node.
  Without the webhook, :func:`add_exclusive_affinity` renders the equivalent constraint on the
  pod template of every pod of the Job (see ``docs/rendering.md`` for the differences).
"""

from __future__ import annotations

from typing import Any

from jobset_core import labels, naming

__all__ = ["add_exclusive_affinity", "add_node_selector_strategy", "exclusive_affinity_terms"]


def add_node_selector_strategy(pod_spec: dict[str, Any], namespace: str, job: str) -> None:
    """``addNamespacedJobNodeSelector`` + ``addTaintToleration``."""
    node_selector = pod_spec.setdefault("nodeSelector", {})
    node_selector[labels.NAMESPACED_JOB] = naming.namespaced_job_name(namespace, job)
    pod_spec.setdefault("tolerations", []).append(
        {"key": labels.NO_SCHEDULE_TAINT, "operator": "Exists", "effect": "NoSchedule"}
    )


def exclusive_affinity_terms(
    job_key: str, topology_key: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The (podAffinity, podAntiAffinity) required terms that pin a Job to one domain alone.

    The affinity term keeps every pod of the Job (``job-key In [own]``) in one domain of
    ``topology_key``; the anti-affinity term keeps pods of any other Job (``job-key Exists``,
    ``NotIn [own]``) out of it, across all namespaces (``namespaceSelector: {}``).
    """
    affinity = {
        "labelSelector": {
            "matchExpressions": [{"key": labels.JOB_KEY, "operator": "In", "values": [job_key]}]
        },
        "topologyKey": topology_key,
        "namespaceSelector": {},
    }
    anti_affinity = {
        "labelSelector": {
            "matchExpressions": [
                {"key": labels.JOB_KEY, "operator": "Exists"},
                {"key": labels.JOB_KEY, "operator": "NotIn", "values": [job_key]},
            ]
        },
        "topologyKey": topology_key,
        "namespaceSelector": {},
    }
    return affinity, anti_affinity


def add_exclusive_affinity(pod_spec: dict[str, Any], job_key: str, topology_key: str) -> None:
    """Append the exclusive-placement terms to the pod spec's required (anti-)affinities."""
    affinity_term, anti_affinity_term = exclusive_affinity_terms(job_key, topology_key)
    affinity = pod_spec.setdefault("affinity", {})
    required = "requiredDuringSchedulingIgnoredDuringExecution"
    affinity.setdefault("podAffinity", {}).setdefault(required, []).append(affinity_term)
    affinity.setdefault("podAntiAffinity", {}).setdefault(required, []).append(anti_affinity_term)
