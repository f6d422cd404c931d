"""Where JobSets and their children live on the API server.

Models are pure data; API coordinates (group, version, plural, kind) are kept here, apart
from them, so the client layer is the only place that turns a model into a request.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "CONFIG_MAP",
    "EVENT",
    "JOB",
    "JOBSET",
    "LOCAL_QUEUE",
    "NODE",
    "POD",
    "SERVICE",
    "WORKLOAD",
    "ApiResource",
]


@dataclass(frozen=True)
class ApiResource:
    """API coordinates of one namespaced resource kind."""

    group: str
    version: str
    kind: str
    plural: str

    @property
    def api_version(self) -> str:
        """The ``apiVersion`` string of objects of this kind."""
        return f"{self.group}/{self.version}" if self.group else self.version


JOBSET = ApiResource(group="jobset.x-k8s.io", version="v1alpha2", kind="JobSet", plural="jobsets")
JOB = ApiResource(group="batch", version="v1", kind="Job", plural="jobs")
SERVICE = ApiResource(group="", version="v1", kind="Service", plural="services")
CONFIG_MAP = ApiResource(group="", version="v1", kind="ConfigMap", plural="configmaps")
POD = ApiResource(group="", version="v1", kind="Pod", plural="pods")
EVENT = ApiResource(group="", version="v1", kind="Event", plural="events")
#: Cluster-scoped: read by name only (a pod's zone is its node's label).
NODE = ApiResource(group="", version="v1", kind="Node", plural="nodes")
#: Kueue's Workload (v0.17 serves v1beta2 and the deprecated v1beta1; v0.20 only v1beta2).
WORKLOAD = ApiResource(
    group="kueue.x-k8s.io", version="v1beta2", kind="Workload", plural="workloads"
)
#: Kueue's LocalQueue (a JobSet names one in its ``kueue.x-k8s.io/queue-name`` label).
LOCAL_QUEUE = ApiResource(
    group="kueue.x-k8s.io", version="v1beta2", kind="LocalQueue", plural="localqueues"
)
