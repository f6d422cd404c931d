"""Label and annotation keys that the upstream JobSet controller (v0.12.0) reads and writes.

Upstream keeps them in ``api/jobset/v1alpha2/jobset_types.go``; the prefix is
``jobset.sigs.k8s.io/`` (the upstream concept docs wrongly say ``jobset.x-k8s.io/``).
"""

from __future__ import annotations

__all__ = [
    "ANCHOR_LABEL",
    "ANCHOR_VALUE",
    "COORDINATOR",
    "EXCLUSIVE_TOPOLOGY",
    "GLOBAL_REPLICAS",
    "GROUP_NAME",
    "GROUP_REPLICAS",
    "JOBSET_CONTROLLER_NAME",
    "JOBSET_NAME",
    "JOBSET_UID",
    "JOB_COMPLETION_INDEX",
    "JOB_GLOBAL_INDEX",
    "JOB_GROUP_INDEX",
    "JOB_INDEX",
    "JOB_KEY",
    "JOB_RESTART_ATTEMPT",
    "KUEUE_JOB_UID",
    "KUEUE_PRIORITY_CLASS",
    "KUEUE_QUEUE",
    "NAMESPACED_JOB",
    "NODE_SELECTOR_STRATEGY",
    "NO_SCHEDULE_TAINT",
    "PRIORITY",
    "REPLICATED_JOB_NAME",
    "REPLICATED_JOB_REPLICAS",
    "RESTART_ATTEMPT",
]

_P = "jobset.sigs.k8s.io/"

JOBSET_NAME = _P + "jobset-name"
JOBSET_UID = _P + "jobset-uid"
REPLICATED_JOB_NAME = _P + "replicatedjob-name"
REPLICATED_JOB_REPLICAS = _P + "replicatedjob-replicas"
GLOBAL_REPLICAS = _P + "global-replicas"
JOB_INDEX = _P + "job-index"
JOB_GLOBAL_INDEX = _P + "job-global-index"
JOB_KEY = _P + "job-key"
RESTART_ATTEMPT = _P + "restart-attempt"
JOB_RESTART_ATTEMPT = _P + "job-restart-attempt"
GROUP_NAME = _P + "group-name"
GROUP_REPLICAS = _P + "group-replicas"
JOB_GROUP_INDEX = _P + "job-group-index"
COORDINATOR = _P + "coordinator"
PRIORITY = _P + "priority"

EXCLUSIVE_TOPOLOGY = "alpha.jobset.sigs.k8s.io/exclusive-topology"
NODE_SELECTOR_STRATEGY = "alpha.jobset.sigs.k8s.io/node-selector"
NAMESPACED_JOB = "alpha.jobset.sigs.k8s.io/namespaced-job"
NO_SCHEDULE_TAINT = "alpha.jobset.sigs.k8s.io/no-schedule"

JOB_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"

#: The reserved ``spec.managedBy`` value of the upstream controller.
JOBSET_CONTROLLER_NAME = "jobset.sigs.k8s.io/jobset-controller"

#: Marks a ConfigMap as the anchor of a native JobSet run (ours, not upstream's).
ANCHOR_LABEL = "jobset-core/anchor"
ANCHOR_VALUE = "native"

#: Kueue (v0.17): the LocalQueue a JobSet waits in (its presence makes the JobSet Kueue's).
KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
#: Kueue: the WorkloadPriorityClass of the run's Workload.
KUEUE_PRIORITY_CLASS = "kueue.x-k8s.io/priority-class"
#: Kueue: on a Workload, the UID of the job it stands for (the JobSet's).
KUEUE_JOB_UID = "kueue.x-k8s.io/job-uid"
