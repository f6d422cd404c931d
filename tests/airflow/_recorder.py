"""What a DAG run did on the cluster: the last state of every JobSet, child Job and pod of one
DAG, and every pod's log, followed live (a JobSet restart and ``delete_policy="always"`` delete
the pods, and their logs with them).

Shared by ``make demo`` (``scripts/demo_narrator.py`` tells it) and the test that runs the
example DAG end to end (``test_cluster_example_retraining.py`` checks it). Needs only the
``kubernetes`` client.
"""

from __future__ import annotations

import threading
import time
from typing import Any

CHILD_SELECTOR = "jobset.sigs.k8s.io/jobset-name"
ATTEMPT_LABEL = "jobset.sigs.k8s.io/restart-attempt"


def attempt_of(obj: Any) -> int:
    """The JobSet restart attempt a child Job or pod belongs to."""
    return int((obj.metadata.labels or {}).get(ATTEMPT_LABEL, "0"))


def pod_index(obj: Any) -> int:
    """The pod's completion index in its Job (the process number of the builders)."""
    annotations = obj.metadata.annotations or {}
    return int(annotations.get("batch.kubernetes.io/job-completion-index", "0"))


class Recorder:
    """The last state of every JobSet, child Job and pod of the DAG ``dag_id`` (in
    ``namespace``, else in every namespace), and every pod's log, between :meth:`start` and
    :meth:`finish`. ``api_client``: the cluster (default: ``KUBECONFIG``)."""

    def __init__(
        self,
        dag_id: str,
        namespace: str | None = None,
        api_client: Any = None,
        workloads: bool = False,
    ) -> None:
        from kubernetes import client, config

        if api_client is None:
            config.load_kube_config()
        self.core = client.CoreV1Api(api_client)
        self.batch = client.BatchV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.selector = f"airflow-jobset/dag-id={dag_id}"
        self.namespace = namespace
        self.workloads = workloads  # Kueue's Workloads too
        self.seen: dict[str, dict[str, Any]] = {
            "jobsets": {},
            "jobs": {},
            "pods": {},
            "workloads": {},
        }
        self.logs: dict[str, list[str]] = {}  # pod uid -> lines
        #: pod uid -> why each read of its log failed (for assertion messages)
        self.log_errors: dict[str, list[str]] = {}
        self.stop = threading.Event()

    def follow_log(self, namespace: str, name: str, uid: str) -> None:
        """The pod's log, from its start to its end: followed, and read from the start again
        whenever a stream ends while the pod lives (a stream may be cut), once more when it
        has ended (every read is whole, from the first line), until the pod is gone."""
        lines = self.logs.setdefault(uid, [])
        ended = False
        while not self.stop.is_set():
            try:
                resp = self.core.read_namespaced_pod_log(
                    name, namespace, follow=not ended, _preload_content=False
                )
                text = b"".join(resp.stream()).decode(errors="replace").splitlines()
                if len(text) >= len(lines):
                    lines[:] = text
            except Exception as error:  # not started yet (400) or gone (404)
                said = getattr(error, "status", None) or type(error).__name__
                self.log_errors.setdefault(uid, []).append(f"{time.time():.1f} {said}")
            if ended:
                return
            try:
                pod = self.core.read_namespaced_pod(name, namespace)
            except Exception:
                return
            if pod.metadata.uid != uid:
                return
            ended = pod.status.phase in ("Succeeded", "Failed")
            if not ended:
                time.sleep(0.5)

    def follow(self, kind: str, list_fn: Any, label_selector: str, **kwargs: Any) -> None:
        """Keep the last state of every object (a DELETED event carries the final one)."""
        from kubernetes import watch

        while not self.stop.is_set():
            try:
                for event in watch.Watch().stream(
                    list_fn, label_selector=label_selector, timeout_seconds=5, **kwargs
                ):
                    self._seen(kind, event["object"])
                    if self.stop.is_set():
                        return
            except Exception:  # the API may hiccup; keep following
                time.sleep(0.5)

    def _seen(self, kind: str, obj: Any) -> None:
        uid = obj["metadata"]["uid"] if isinstance(obj, dict) else obj.metadata.uid
        if kind == "pods" and uid not in self.seen[kind]:
            threading.Thread(
                target=self.follow_log,
                args=(obj.metadata.namespace, obj.metadata.name, uid),
                daemon=True,
            ).start()
        self.seen[kind][uid] = obj

    def start(self) -> None:
        custom = {"group": "jobset.x-k8s.io", "version": "v1alpha2", "plural": "jobsets"}
        workloads = {"group": "kueue.x-k8s.io", "version": "v1beta2", "plural": "workloads"}
        if self.namespace:
            where: dict[str, Any] = {"namespace": self.namespace}
            lists = (
                self.custom.list_namespaced_custom_object,
                self.batch.list_namespaced_job,
                self.core.list_namespaced_pod,
            )
        else:
            where = {}
            lists = (
                self.custom.list_cluster_custom_object,
                self.batch.list_job_for_all_namespaces,
                self.core.list_pod_for_all_namespaces,
            )
        watchers = [
            ("jobsets", lists[0], self.selector, {**custom, **where}),
            ("jobs", lists[1], CHILD_SELECTOR, where),
            ("pods", lists[2], CHILD_SELECTOR, where),
        ]
        if self.workloads:  # Kueue's Workloads of every job
            selector = "kueue.x-k8s.io/job-uid"
            watchers.append(("workloads", lists[0], selector, {**workloads, **where}))
        for kind, fn, selector, kwargs in watchers:
            threading.Thread(
                target=self.follow, args=(kind, fn, selector), kwargs=kwargs, daemon=True
            ).start()
        time.sleep(1)

    def finish(self) -> None:
        """Stop watching; keep only the Jobs and pods of the DAG's JobSets."""
        time.sleep(2)
        self.stop.set()
        names = {js["metadata"]["name"] for js in self.seen["jobsets"].values()}
        for kind in ("jobs", "pods"):
            self.seen[kind] = {
                uid: obj
                for uid, obj in self.seen[kind].items()
                if (obj.metadata.labels or {}).get(CHILD_SELECTOR) in names
            }
