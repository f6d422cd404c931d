"""The shared pieces of the builders: plain API-shaped data (the JobSet frame, replicated jobs,
containers, env entries, the rank and launch shell, the checkpoint volume), turned into a
validated :class:`~jobset_core.models.JobSet` by :func:`_finish`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jobset_core import labels
from jobset_core.models import JobSet
from jobset_core.naming import coordinator_endpoint
from jobset_core.workload import inject_workload_env

#: Downward-API field path of a pod's completion index inside its Indexed Job.
COMPLETION_INDEX_FIELD = f"metadata.annotations['{labels.JOB_COMPLETION_INDEX}']"
#: Downward-API field path of the index of the pod's Job inside its replicated job.
JOB_INDEX_FIELD = f"metadata.labels['{labels.JOB_INDEX}']"
#: Downward-API field path of the name of the pod's JobSet (as created, whatever the builder
#: was told).
JOBSET_NAME_FIELD = f"metadata.labels['{labels.JOBSET_NAME}']"
_NAME_REF = "$(JOBSET_NAME)"  # expanded by the kubelet from the env entry defined first
#: The variable that tells the program where its checkpoints are (with ``checkpoint_dir``).
CHECKPOINT_ENV = "CHECKPOINT_DIR"
#: The name of the checkpoint volume (and of the JobSet's own claim template).
CHECKPOINT_VOLUME = "checkpoints"

Resources = Mapping[str, Mapping[str, str | int]]
_LAUNCH_NAME = "jobset-launch"  # $0 of the rank-computing shell


def _check_checkpoint(
    directory: str | None,
    volume: str | Mapping[str, Any] | None,
    claim: Mapping[str, Any] | None,
) -> None:
    if directory is None:
        if volume is not None or claim is not None:
            raise ValueError("checkpoint_volume and checkpoint_claim need a checkpoint_dir")
        return
    if not isinstance(directory, str) or not directory.startswith("/"):
        raise ValueError(f"checkpoint_dir must be an absolute path, not {directory!r}")
    if volume is not None and claim is not None:
        raise ValueError("give checkpoint_volume or checkpoint_claim, not both")
    if isinstance(volume, str) and not volume:
        raise ValueError("checkpoint_volume must name a PersistentVolumeClaim")
    if volume is not None and not isinstance(volume, (str, Mapping)):
        raise ValueError(
            "checkpoint_volume must be a claim name or a volume source mapping, "
            f"not {type(volume).__name__}"
        )
    if isinstance(volume, Mapping) and "name" in volume:
        raise ValueError("checkpoint_volume is a volume source: its name is always 'checkpoints'")


def _finish(
    jobset: dict[str, Any],
    checkpoint_dir: str | None,
    volume: str | Mapping[str, Any] | None,
    claim: Mapping[str, Any] | None,
    inject_env: bool,
) -> JobSet:
    """The JobSet with its checkpoint directory and the workload's variables."""
    if checkpoint_dir is not None:
        for rjob in jobset["spec"]["replicatedJobs"]:
            pod = rjob["template"]["spec"]["template"]["spec"]
            for container in pod["containers"]:
                container["env"].append(_env(CHECKPOINT_ENV, checkpoint_dir))
                if volume is not None or claim is not None:
                    mount = {"name": CHECKPOINT_VOLUME, "mountPath": checkpoint_dir}
                    container.setdefault("volumeMounts", []).append(mount)
            if volume is not None:
                source = (
                    {"persistentVolumeClaim": {"claimName": volume}}
                    if isinstance(volume, str)
                    else dict(volume)
                )
                pod.setdefault("volumes", []).append({"name": CHECKPOINT_VOLUME, **source})
        if claim is not None:
            template = {"metadata": {"name": CHECKPOINT_VOLUME}, "spec": dict(claim)}
            jobset["spec"]["volumeClaimPolicies"] = [{"templates": [template]}]
    built = JobSet.model_validate(jobset)
    return inject_workload_env(built) if inject_env else built


def _at_least(minimum: int, **values: int) -> None:
    for key, value in values.items():
        if value < minimum:
            raise ValueError(f"{key} must be at least {minimum}, got {value}")


def _jobset(
    name: str,
    *,
    namespace: str | None,
    jobset_labels: Mapping[str, str] | None,
    jobset_annotations: Mapping[str, str] | None,
    coordinator: str,
    suspend: bool | None,
    ttl_seconds_after_finished: int | None,
    max_restarts: int,
    success_targets: list[str] | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    if jobset_labels:
        metadata["labels"] = dict(jobset_labels)
    if jobset_annotations:
        metadata["annotations"] = dict(jobset_annotations)
    success: dict[str, Any] = {"operator": "All"}
    if success_targets:
        success["targetReplicatedJobs"] = success_targets
    spec: dict[str, Any] = {
        "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
        "coordinator": {"replicatedJob": coordinator, "jobIndex": 0, "podIndex": 0},
        "successPolicy": success,
        "replicatedJobs": [],
    }
    if max_restarts:
        spec["failurePolicy"] = {"maxRestarts": max_restarts}
    if suspend is not None:
        spec["suspend"] = suspend
    if ttl_seconds_after_finished is not None:
        spec["ttlSecondsAfterFinished"] = ttl_seconds_after_finished
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": metadata,
        "spec": spec,
    }


def _endpoint(jobset: dict[str, Any]) -> str:
    """The coordinator's address in terms of ``$(JOBSET_NAME)`` (see the module docstring)."""
    endpoint = coordinator_endpoint(JobSet.model_validate(jobset))
    assert endpoint is not None  # every builder sets spec.coordinator
    name = jobset["metadata"]["name"]
    host, _, domain = endpoint.partition(".")
    assert host.startswith(name + "-") and domain == name  # builders never set a subdomain
    return f"{_NAME_REF}{host[len(name) :]}.{_NAME_REF}"


def _name_env() -> dict[str, Any]:
    """``JOBSET_NAME``: the first env entry of every container (the addresses refer to it)."""
    return _env_from("JOBSET_NAME", JOBSET_NAME_FIELD)


def _replicated_job(
    name: str, replicas: int, pods: int, container: dict[str, Any], backoff_limit: int
) -> dict[str, Any]:
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {
                "completionMode": "Indexed",
                "parallelism": pods,
                "completions": pods,
                "backoffLimit": backoff_limit,
                "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
            }
        },
    }


def _container(
    name: str,
    image: str,
    command: list[str],
    env: list[dict[str, Any]],
    *,
    resources: Resources | None,
    ports: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": image, "command": command, "env": env}
    if ports:
        container["ports"] = ports
    if resources:
        container["resources"] = {
            kind: {res: str(qty) for res, qty in values.items()}
            for kind, values in resources.items()
        }
    return container


def _ports(name: str, port: int | None) -> list[dict[str, Any]]:
    return [] if port is None else [{"name": name, "containerPort": port}]


def _merge_limits(resources: Resources | None, limits: Mapping[str, int]) -> Resources | None:
    if not limits:
        return resources
    merged = {kind: dict(values) for kind, values in (resources or {}).items()}
    merged.setdefault("limits", {}).update(limits)
    return merged


def _add_shm(pod_spec: dict[str, Any], size: str) -> None:
    pod_spec["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": size}}]
    for container in pod_spec["containers"]:
        container["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]


def _env(name: str, value: str) -> dict[str, Any]:
    return {"name": name, "value": value}


def _env_from(name: str, field_path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": field_path}}}


def _env_map(env: Mapping[str, str] | None) -> list[dict[str, Any]]:
    return [_env(key, str(value)) for key, value in (env or {}).items()]


def _rank(variable: str, jobs: int, per_job: int) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The env entries and shell exports giving ``variable = jobIndex * per_job + podIndex``.

    Straight from the downward API when one factor is trivial; otherwise the shell computes it
    from ``JOB_INDEX`` and ``JOB_COMPLETION_INDEX``.
    """
    if jobs == 1:
        return [_env_from(variable, COMPLETION_INDEX_FIELD)], {}
    if per_job == 1:
        return [_env_from(variable, JOB_INDEX_FIELD)], {}
    env = [
        _env_from("JOB_INDEX", JOB_INDEX_FIELD),
        _env_from("JOB_COMPLETION_INDEX", COMPLETION_INDEX_FIELD),
    ]
    return env, {variable: f"$((JOB_INDEX * {per_job} + JOB_COMPLETION_INDEX))"}


def _launch(argv: list[str], exports: Mapping[str, str]) -> list[str]:
    """``argv`` itself, or a POSIX shell that exports computed values and then execs ``argv``."""
    if not exports:
        return argv
    assignments = "; ".join(f"export {key}={value}" for key, value in exports.items())
    return ["/bin/sh", "-c", f'{assignments}; exec "$@"', _LAUNCH_NAME, *argv]


def _rendezvous_args(name: str, rendezvous: str, *, static_rank: bool) -> list[str]:
    if rendezvous == "c10d":
        return [
            "--rdzv_backend=c10d",
            "--rdzv_endpoint=$(MASTER_ADDR):$(MASTER_PORT)",
            f"--rdzv_id={name}",
        ]
    args = ["--master_addr=$(MASTER_ADDR)", "--master_port=$(MASTER_PORT)"]
    if static_rank:
        args.append("--node_rank=$(NODE_RANK)")
    return args


def _torchrun(
    nodes: int, procs_per_node: int | str, options: Sequence[str], argv: list[str]
) -> list[str]:
    """``argv`` under ``torchrun``: the node and process counts, then ``options``."""
    return ["torchrun", f"--nnodes={nodes}", f"--nproc_per_node={procs_per_node}", *options, *argv]


def _place(
    template: dict[str, Any],
    *,
    node_selector: Mapping[str, str] | None,
    topology: str | None,
    shm_size: str | None = None,
) -> None:
    """Where a replicated job's pods go: the node selector, an exclusive topology domain per
    child Job (``topology``: a node label key), and a memory-backed ``/dev/shm``."""
    pod_spec = template["template"]["spec"]["template"]["spec"]
    if shm_size:
        _add_shm(pod_spec, shm_size)
    if node_selector:
        pod_spec["nodeSelector"] = dict(node_selector)
    if topology is not None:
        template["template"]["metadata"] = {"annotations": {labels.EXCLUSIVE_TOPOLOGY: topology}}
