"""The floor: an independent raw watch with the official ``kubernetes`` client.

One thread per kind (JobSets, Jobs, pods) watches the whole cluster the way a user of the
official client would (``watch.Watch().stream(list_...)``, no timeout: the server ends the
watch and the client reopens it where it stopped) and reports, for every object of the
benchmark namespaces, the moment it first sees it ended. That moment is both the floor of
detection latency (nobody can learn sooner than a watch) and what tells which status write of
the audit log decided a run.

A waiter that must record a native run's end before it may answer (the poking sensor: its
process may exit right after its poke) cannot answer before one write more. So, for every
Job of a native run (its owner is the run's anchor ConfigMap), the floor also makes one write
as soon as it sees the Job ended (it creates a small ConfigMap beside it, on a thread of its
own so that its watch goes on) and reports the moment that write came back: the floor of an
answer that carries a write.

For a queue (Kueue), the same watch of Workloads (``resources: ["workloads"]``) reports the
moment it first sees each one admitted (``Admitted=True``), named by its JobSet (``owner``).

Run as ``python -m benchmarks.floor <spec.json>`` (spec: ``kubeconfig``, ``prefix``, and
``resources``: the kinds to watch, JobSets, Jobs and pods unless it names others; ``record``:
make the write above).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from benchmarks.subject import Channel, freeze_start_up

__all__ = ["admitted", "ended", "native_job", "owner"]

#: The custom resources watched, by plural: (group, version).
CUSTOM = {"jobsets": ("jobset.x-k8s.io", "v1alpha2"), "workloads": ("kueue.x-k8s.io", "v1beta2")}


def admitted(workload: Any) -> bool:
    """Whether a Kueue Workload (a dict, as the official client returns it) is admitted now:
    ``Admitted=True`` and not evicted since (pure)."""
    conditions = {
        c.get("type"): c.get("status")
        for c in (workload.get("status") or {}).get("conditions") or []
    }
    return conditions.get("Admitted") == "True" and conditions.get("Evicted") != "True"


def owner(obj: Any) -> str:
    """The name of the JobSet a Workload (a dict) stands for ("" for none; pure)."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == "JobSet":
            return str(ref.get("name") or "")
    return ""


def ended(resource: str, obj: Any) -> bool:
    """Whether an object (as the official client returns it) has ended (pure); a Workload
    "ends" its wait when it is admitted."""
    if resource == "workloads":
        return admitted(obj)
    if resource == "jobsets":
        conditions = (obj.get("status") or {}).get("conditions") or []
        return any(
            c.get("type") in ("Completed", "Failed") and c.get("status") == "True"
            for c in conditions
        )
    if resource == "jobs":
        conditions = (obj.status.conditions or []) if obj.status else []
        return any(c.type in ("Complete", "Failed") and c.status == "True" for c in conditions)
    phase = obj.status.phase if obj.status else None
    return phase in ("Succeeded", "Failed")


def native_job(resource: str, obj: Any) -> bool:
    """Whether an object (as the official client returns it) is a Job of a native run: one
    owned by a ConfigMap, the run's anchor (pure)."""
    if resource != "jobs":
        return False
    refs = obj.metadata.owner_references or []
    return any(ref.kind == "ConfigMap" for ref in refs)


class _Recorder:
    """The floor's one write per native Job seen ended, off the watch's thread."""

    def __init__(self, api: Any, channel: Channel) -> None:
        from kubernetes import client

        self._core = client.CoreV1Api(api)
        self._channel = channel
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="record")

    def record(self, namespace: str, name: str) -> None:
        self._pool.submit(self._write, namespace, name)

    def _write(self, namespace: str, name: str) -> None:
        body = {"metadata": {"name": f"floor-{name}"}, "data": {"ended": "true"}}
        try:
            self._core.create_namespaced_config_map(namespace, body)
        except Exception as error:
            self._channel.emit("record-error", ns=namespace, name=name, error=repr(error))
            return
        self._channel.emit("recorded", resource="jobs", ns=namespace, name=name, at=time.time())


def _meta(resource: str, obj: Any) -> tuple[str, str, str]:
    if resource in CUSTOM:
        meta = obj.get("metadata") or {}
        return meta.get("namespace", ""), meta.get("name", ""), meta.get("uid", "")
    return obj.metadata.namespace, obj.metadata.name, obj.metadata.uid


def _lister(resource: str, api: Any) -> Any:
    from kubernetes import client

    if resource in CUSTOM:
        custom = client.CustomObjectsApi(api)
        group, version = CUSTOM[resource]
        return lambda **kw: custom.list_cluster_custom_object(group, version, resource, **kw)
    if resource == "jobs":
        return client.BatchV1Api(api).list_job_for_all_namespaces
    return client.CoreV1Api(api).list_pod_for_all_namespaces


def _watch(
    resource: str,
    api: Any,
    prefix: str,
    channel: Channel,
    seen: set[str],
    recorder: _Recorder | None = None,
) -> None:
    from kubernetes import watch

    lister = _lister(resource, api)
    while True:  # a stream that breaks (not a server timeout) is opened again
        try:
            for event in watch.Watch().stream(lister):
                obj = event["object"]
                namespace, name, uid = _meta(resource, obj)
                if not namespace.startswith(prefix) or uid in seen:
                    continue
                if event["type"] != "DELETED" and ended(resource, obj):
                    seen.add(uid)
                    more = {"owner": owner(obj)} if resource == "workloads" else {}
                    channel.emit(
                        "seen",
                        resource=resource,
                        ns=namespace,
                        name=name,
                        at=time.time(),
                        **more,
                    )
                    if recorder is not None and native_job(resource, obj):
                        recorder.record(namespace, name)
        except Exception as error:
            channel.emit("watch-error", resource=resource, error=repr(error))
            time.sleep(1)


def main(spec: dict[str, Any]) -> None:
    channel = Channel()
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config(spec["kubeconfig"], client_configuration=configuration)
    seen: set[str] = set()
    recorder = _Recorder(client.ApiClient(configuration), channel) if spec.get("record") else None
    for resource in spec.get("resources") or ("jobsets", "jobs", "pods"):
        api = client.ApiClient(configuration)
        threading.Thread(
            target=_watch,
            args=(resource, api, spec["prefix"], channel, seen, recorder),
            daemon=True,
            name=f"watch {resource}",
        ).start()
    freeze_start_up()
    channel.emit("ready")
    next_command = channel.blocking_commands()
    while next_command().get("cmd") != "stop":
        channel.emit("sample")
    channel.emit("bye")


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as handle:
        main(json.load(handle))
