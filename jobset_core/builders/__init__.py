"""Ready-made JobSets for the common distributed shapes: leader + workers, PyTorch DDP, JAX.

Each builder returns an ordinary :class:`~jobset_core.models.JobSet` (change it like any other
model) that passes :func:`jobset_core.validation.validate`. The distributed settings are derived
from what the JobSet controller guarantees, never from guesses:

* the coordinator pod's stable DNS name ``<jobset>-<rj>-<jobIndex>-<podIndex>.<subdomain>``
  (``spec.coordinator``; the pods' hostnames come from the headless Service, so
  ``network.enableDNSHostnames`` is set and child Jobs are ``Indexed``). The address is
  written as ``$(JOBSET_NAME)-<rj>-0-0.$(JOBSET_NAME)``, with ``JOBSET_NAME`` read from the
  pod's ``jobset.sigs.k8s.io/jobset-name`` label and expanded by the kubelet, so it stays right
  when the JobSet is created under another name (the Airflow operator appends a hash of the
  task instance);
* a pod's place in the JobSet, read through the downward API: the Job index from the label
  ``jobset.sigs.k8s.io/job-index`` and the pod index from the annotation
  ``batch.kubernetes.io/job-completion-index``. When a rank combines both
  (``jobIndex * podsPerJob + podIndex``), the container starts through ``/bin/sh -c``, which
  computes it and then execs the real command, so the image needs a POSIX shell.

Pods never restart in place (``restartPolicy: Never``, ``backoffLimit: 0`` by default): a failed
pod fails its Job, and ``max_restarts`` recreates the whole JobSet (``failurePolicy``), which is
what collective training needs to rendezvous again. Every container also gets the workload's
variables (``JOBSET_RESTART_ATTEMPT``, ``JOBSET_POD_INDEX``...: :mod:`jobset_core.workload`;
``inject_env=False`` leaves them out), and with ``checkpoint_dir`` the path to resume from
(``CHECKPOINT_DIR``), mounted from ``checkpoint_volume`` (an existing claim or any volume
source) or from a claim of the JobSet's own (``checkpoint_claim``, the controller's
``volumeClaimPolicies``), which outlives the JobSet's restarts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from jobset_core.builders._pieces import (
    CHECKPOINT_ENV,
    CHECKPOINT_VOLUME,
    COMPLETION_INDEX_FIELD,
    JOB_INDEX_FIELD,
    JOBSET_NAME_FIELD,
    Resources,
    _at_least,
    _check_checkpoint,
    _container,
    _endpoint,
    _env,
    _env_from,
    _env_map,
    _finish,
    _jobset,
    _launch,
    _merge_limits,
    _name_env,
    _place,
    _ports,
    _rank,
    _rendezvous_args,
    _replicated_job,
    _torchrun,
)
from jobset_core.models import JobSet
from jobset_core.naming import coordinator_endpoint  # noqa: F401  (the examples use it)

__all__ = [
    "CHECKPOINT_ENV",
    "CHECKPOINT_VOLUME",
    "COMPLETION_INDEX_FIELD",
    "JOBSET_NAME_FIELD",
    "JOB_INDEX_FIELD",
    "jax_multislice",
    "leader_workers",
    "pytorch_ddp",
]


def leader_workers(
    name: str,
    image: str,
    *,
    workers: int,
    leader_command: Sequence[str],
    worker_command: Sequence[str],
    worker_image: str | None = None,
    port: int | None = None,
    workers_wait_for_leader: bool = False,
    leader_name: str = "leader",
    workers_name: str = "workers",
    env: Mapping[str, str] | None = None,
    resources: Resources | None = None,
    max_restarts: int = 0,
    backoff_limit: int = 0,
    namespace: str | None = None,
    jobset_labels: Mapping[str, str] | None = None,
    jobset_annotations: Mapping[str, str] | None = None,
    suspend: bool | None = None,
    ttl_seconds_after_finished: int | None = None,
    checkpoint_dir: str | None = None,
    checkpoint_volume: str | Mapping[str, Any] | None = None,
    checkpoint_claim: Mapping[str, Any] | None = None,
    inject_env: bool = True,
) -> JobSet:
    """A leader pod and ``workers`` worker pods; the JobSet completes when the leader does.

    The leader is the coordinator; every container gets ``COORDINATOR_ADDRESS`` (its stable
    DNS name) and, with ``port``, ``COORDINATOR_PORT`` (also declared on the leader container).
    Workers get ``WORKER_INDEX`` (their completion index, ``0..workers-1``) and
    ``NUM_WORKERS``. The success policy targets the leader only, so still-running workers are
    deleted once the leader succeeds.

    Args:
        name: JobSet name (a DNS-1035 label; child Job names must stay within 63 characters).
        image: Container image of the leader (and of the workers unless ``worker_image``).
        workers: Number of worker pods (one Indexed Job); at least 1.
        leader_command: The leader container's command (argv).
        worker_command: The worker containers' command (argv).
        worker_image: Image of the workers when it differs from the leader's.
        port: The port the leader listens on, exported as ``COORDINATOR_PORT``.
        workers_wait_for_leader: Create the workers only once the leader is Ready
            (``dependsOn``), e.g. when workers must find a listening leader at start.
        leader_name: Name of the leader replicated job.
        workers_name: Name of the workers replicated job.
        env: Extra environment variables for every container.
        resources: ``requests``/``limits`` of every container.
        max_restarts: ``failurePolicy.maxRestarts``: how often the whole JobSet is recreated
            after a failure before it fails (0: fail at the first failure).
        backoff_limit: ``backoffLimit`` of each Job (pod retries inside a Job).
        namespace: ``metadata.namespace``.
        jobset_labels: Labels of the JobSet (e.g. ``kueue.x-k8s.io/queue-name``).
        jobset_annotations: Annotations of the JobSet.
        suspend: ``spec.suspend`` (create suspended, e.g. for Kueue).
        ttl_seconds_after_finished: Delete the JobSet that long after it finished.
        checkpoint_dir: Where the program keeps its checkpoints (an absolute path): exported
            as ``CHECKPOINT_DIR`` to every container, the mount path of the checkpoint volume.
        checkpoint_volume: What is mounted at ``checkpoint_dir``: the name of an existing
            PersistentVolumeClaim, or a volume source (``{"nfs": {...}}``, ``{"csi": ...}``).
        checkpoint_claim: A PersistentVolumeClaim spec for a claim of the JobSet's own
            (``volumeClaimPolicies``: created with it, kept through its restarts, deleted with
            it; controller backend only), mounted at ``checkpoint_dir``.
        inject_env: Give every container the workload's variables (:mod:`jobset_core.workload`).

    Returns:
        The JobSet.

    Examples:
        >>> js = leader_workers(
        ...     "demo", "python:3.12", workers=2,
        ...     leader_command=["python", "-m", "http.server", "8000"],
        ...     worker_command=["sh", "-c", "wget -qO- $COORDINATOR_ADDRESS:$COORDINATOR_PORT"],
        ...     port=8000,
        ... )
        >>> [rj.name for rj in js.replicated_jobs]
        ['leader', 'workers']
        >>> coordinator_endpoint(js)
        'demo-leader-0-0.demo'
    """
    _at_least(1, workers=workers)
    _check_checkpoint(checkpoint_dir, checkpoint_volume, checkpoint_claim)
    jobset = _jobset(
        name,
        namespace=namespace,
        jobset_labels=jobset_labels,
        jobset_annotations=jobset_annotations,
        coordinator=leader_name,
        suspend=suspend,
        ttl_seconds_after_finished=ttl_seconds_after_finished,
        max_restarts=max_restarts,
        success_targets=[leader_name],
    )
    common = [_name_env(), _env("COORDINATOR_ADDRESS", _endpoint(jobset))]
    if port is not None:
        common.append(_env("COORDINATOR_PORT", str(port)))
    common += _env_map(env)
    leader = _container(
        "leader",
        image,
        list(leader_command),
        common,
        resources=resources,
        ports=_ports("leader", port),
    )
    worker_env = [
        *common,
        _env("NUM_WORKERS", str(workers)),
        _env_from("WORKER_INDEX", COMPLETION_INDEX_FIELD),
    ]
    worker = _container(
        "worker", worker_image or image, list(worker_command), worker_env, resources=resources
    )
    workers_job = _replicated_job(workers_name, 1, workers, worker, backoff_limit)
    if workers_wait_for_leader:
        workers_job["dependsOn"] = [{"name": leader_name, "status": "Ready"}]
    jobset["spec"]["replicatedJobs"] = [
        _replicated_job(leader_name, 1, 1, leader, backoff_limit),
        workers_job,
    ]
    return _finish(jobset, checkpoint_dir, checkpoint_volume, checkpoint_claim, inject_env)


def pytorch_ddp(
    name: str,
    image: str,
    command: Sequence[str],
    *,
    nodes: int,
    procs_per_node: int | Literal["auto", "cpu", "gpu"],
    jobs: int = 1,
    port: int = 29500,
    rendezvous: Literal["static", "c10d"] = "static",
    launcher: bool = True,
    torchrun_args: Sequence[str] = (),
    gpus_per_node: int = 0,
    gpu_resource: str = "nvidia.com/gpu",
    resources: Resources | None = None,
    shm_size: str | None = None,
    env: Mapping[str, str] | None = None,
    node_selector: Mapping[str, str] | None = None,
    exclusive_topology: str | None = None,
    replicated_job: str = "node",
    max_restarts: int = 0,
    backoff_limit: int = 0,
    namespace: str | None = None,
    jobset_labels: Mapping[str, str] | None = None,
    jobset_annotations: Mapping[str, str] | None = None,
    suspend: bool | None = None,
    ttl_seconds_after_finished: int | None = None,
    checkpoint_dir: str | None = None,
    checkpoint_volume: str | Mapping[str, Any] | None = None,
    checkpoint_claim: Mapping[str, Any] | None = None,
    inject_env: bool = True,
) -> JobSet:
    """Distributed data-parallel PyTorch: ``nodes`` pods, each running ``torchrun``.

    One replicated job of ``jobs`` Indexed Jobs with ``nodes / jobs`` pods each. Pod 0 of Job 0
    is the coordinator and the torchrun master. Every container gets ``MASTER_ADDR`` (the
    coordinator's DNS name), ``MASTER_PORT``, ``NNODES``, ``NPROC_PER_NODE`` and ``NODE_RANK``
    (``jobIndex * nodes/jobs + completionIndex``; with one Job simply the completion index,
    read through the downward API). With ``launcher`` (the default) the container runs
    ``torchrun --nnodes=... --nproc_per_node=... <rendezvous args> <command>``; without it,
    ``command`` runs as given and reads the variables itself.

    Rendezvous ``"static"`` passes ``--master_addr/--master_port/--node_rank`` (ranks follow
    the pods' indexes; with ``jobs > 1`` the computed rank reaches torchrun as
    ``PET_NODE_RANK``, its environment spelling of ``--node_rank``); ``"c10d"`` passes
    ``--rdzv_backend=c10d --rdzv_endpoint=<master>:<port> --rdzv_id=<name>`` (torchrun assigns
    the ranks). The JobSet's ``network`` publishes not-ready pods, so the master's name resolves
    while the other pods are still starting.

    Args:
        name: JobSet name (also the torchrun ``rdzv_id``).
        image: Container image (must contain ``torchrun``, and ``/bin/sh`` when ``jobs > 1``).
        command: The training program and its arguments, e.g. ``["train.py", "--epochs=3"]``
            (torchrun runs it; without ``launcher`` the full argv).
        nodes: Number of pods (torchrun nodes); a multiple of ``jobs``.
        procs_per_node: Processes per pod (torchrun ``--nproc_per_node``: a number, ``"gpu"``,
            ``"cpu"`` or ``"auto"``), usually the GPUs per pod.
        jobs: Number of child Jobs the pods are split over (e.g. one per rack with
            ``exclusive_topology``).
        port: The master's port (``MASTER_PORT``; declared on the container as ``torchrun``).
        rendezvous: ``"static"`` or ``"c10d"`` (see above).
        launcher: Run ``command`` under ``torchrun`` (else run it as is).
        torchrun_args: Extra torchrun options, placed before the program (e.g.
            ``["--max_restarts=3"]``).
        gpus_per_node: GPUs requested per pod (as limits of ``gpu_resource``).
        gpu_resource: The extended resource name of a GPU.
        resources: Further ``requests``/``limits`` of the container.
        shm_size: Size of a memory-backed ``/dev/shm`` (DataLoader workers need more than the
            container runtime's 64Mi), e.g. ``"16Gi"``.
        env: Extra environment variables.
        node_selector: The pods' ``nodeSelector``.
        exclusive_topology: A node label key: each child Job gets its own topology domain
            (``alpha.jobset.sigs.k8s.io/exclusive-topology``).
        replicated_job: Name of the replicated job.
        max_restarts: ``failurePolicy.maxRestarts``: whole-JobSet restarts after a failure.
        backoff_limit: ``backoffLimit`` of each Job.
        namespace: ``metadata.namespace``.
        jobset_labels: Labels of the JobSet.
        jobset_annotations: Annotations of the JobSet.
        suspend: ``spec.suspend``.
        ttl_seconds_after_finished: Delete the JobSet that long after it finished.
        checkpoint_dir: Where the program keeps its checkpoints (an absolute path): exported
            as ``CHECKPOINT_DIR`` to every container, the mount path of the checkpoint volume.
        checkpoint_volume: What is mounted at ``checkpoint_dir``: the name of an existing
            PersistentVolumeClaim, or a volume source (``{"nfs": {...}}``, ``{"csi": ...}``).
        checkpoint_claim: A PersistentVolumeClaim spec for a claim of the JobSet's own
            (``volumeClaimPolicies``: created with it, kept through its restarts, deleted with
            it; controller backend only), mounted at ``checkpoint_dir``.
        inject_env: Give every container the workload's variables (:mod:`jobset_core.workload`).

    Returns:
        The JobSet.

    Examples:
        >>> js = pytorch_ddp(
        ...     "ddp", "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", ["train.py"],
        ...     nodes=4, procs_per_node=8, gpus_per_node=8, max_restarts=3,
        ... )
        >>> coordinator_endpoint(js)
        'ddp-node-0-0.ddp'
        >>> js.replicated_jobs[0].template.spec["completions"]
        4
    """
    _at_least(1, nodes=nodes, jobs=jobs)
    _check_checkpoint(checkpoint_dir, checkpoint_volume, checkpoint_claim)
    if nodes % jobs:
        raise ValueError(f"nodes ({nodes}) must be a multiple of jobs ({jobs})")
    per_job = nodes // jobs
    jobset = _jobset(
        name,
        namespace=namespace,
        jobset_labels=jobset_labels,
        jobset_annotations=jobset_annotations,
        coordinator=replicated_job,
        suspend=suspend,
        ttl_seconds_after_finished=ttl_seconds_after_finished,
        max_restarts=max_restarts,
    )
    rank_env, exports = _rank("NODE_RANK", jobs, per_job)
    if exports:
        exports["PET_NODE_RANK"] = "$NODE_RANK"  # torchrun reads PET_<OPTION> as the default
    container_env = [
        _name_env(),
        _env("MASTER_ADDR", _endpoint(jobset)),
        _env("MASTER_PORT", str(port)),
        _env("NNODES", str(nodes)),
        _env("NPROC_PER_NODE", str(procs_per_node)),
        *rank_env,
        *_env_map(env),
    ]
    argv = list(command)
    if launcher:
        rendezvous_args = _rendezvous_args(name, rendezvous, static_rank=not exports)
        argv = _torchrun(nodes, procs_per_node, [*rendezvous_args, *torchrun_args], argv)
    limits = {gpu_resource: gpus_per_node} if gpus_per_node else {}
    container = _container(
        "pytorch",
        image,
        _launch(argv, exports),
        container_env,
        resources=_merge_limits(resources, limits),
        ports=_ports("torchrun", port),
    )
    template = _replicated_job(replicated_job, jobs, per_job, container, backoff_limit)
    topology = exclusive_topology or None
    _place(template, node_selector=node_selector, topology=topology, shm_size=shm_size)
    jobset["spec"]["replicatedJobs"] = [template]
    return _finish(jobset, checkpoint_dir, checkpoint_volume, checkpoint_claim, inject_env)


def jax_multislice(
    name: str,
    image: str,
    command: Sequence[str],
    *,
    slices: int,
    hosts_per_slice: int,
    topology_key: str,
    coordinator_port: int = 1234,
    megascale: bool = True,
    megascale_port: int = 8080,
    chips_per_host: int = 0,
    chip_resource: str = "google.com/tpu",
    resources: Resources | None = None,
    env: Mapping[str, str] | None = None,
    node_selector: Mapping[str, str] | None = None,
    replicated_job: str = "slice",
    max_restarts: int = 0,
    backoff_limit: int = 0,
    namespace: str | None = None,
    jobset_labels: Mapping[str, str] | None = None,
    jobset_annotations: Mapping[str, str] | None = None,
    suspend: bool | None = None,
    ttl_seconds_after_finished: int | None = None,
    checkpoint_dir: str | None = None,
    checkpoint_volume: str | Mapping[str, Any] | None = None,
    checkpoint_claim: Mapping[str, Any] | None = None,
    inject_env: bool = True,
) -> JobSet:
    """JAX across ``slices`` slices: one child Job per slice, each alone in its topology domain.

    The replicated job has ``slices`` Indexed Jobs of ``hosts_per_slice`` pods; the annotation
    ``alpha.jobset.sigs.k8s.io/exclusive-topology: <topology_key>`` places each Job in its own
    domain of that node label (e.g. a TPU node pool). Every container gets:

    * ``JAX_COORDINATOR_ADDRESS`` (``<coordinator DNS name>:<coordinator_port>``, read by
      ``jax.distributed.initialize()``), ``JAX_NUM_PROCESSES`` (``slices * hosts_per_slice``)
      and ``JAX_PROCESS_ID`` (``sliceId * hosts_per_slice + hostId``);
    * ``SLICE_ID`` (the Job index), ``HOST_ID`` (the completion index), ``NUM_SLICES`` and
      ``HOSTS_PER_SLICE``;
    * with ``megascale`` (multislice over the data-center network on Cloud TPU):
      ``MEGASCALE_COORDINATOR_ADDRESS``, ``MEGASCALE_PORT``, ``MEGASCALE_NUM_SLICES`` and
      ``MEGASCALE_SLICE_ID``.

    Args:
        name: JobSet name.
        image: Container image (with ``/bin/sh`` when both ``slices`` and ``hosts_per_slice``
            exceed 1, to compute ``JAX_PROCESS_ID``).
        command: The program's argv.
        slices: Number of slices (child Jobs).
        hosts_per_slice: Pods per slice.
        topology_key: Node label whose values are the exclusive domains
            (e.g. ``cloud.google.com/gke-nodepool``).
        coordinator_port: Port of the JAX distributed coordinator.
        megascale: Also export the ``MEGASCALE_*`` variables of the TPU runtime.
        megascale_port: ``MEGASCALE_PORT``.
        chips_per_host: Accelerator chips requested per pod (as limits of ``chip_resource``).
        chip_resource: The extended resource name of a chip.
        resources: Further ``requests``/``limits`` of the container.
        env: Extra environment variables.
        node_selector: The pods' ``nodeSelector`` (e.g. TPU accelerator and topology).
        replicated_job: Name of the replicated job.
        max_restarts: ``failurePolicy.maxRestarts``: whole-JobSet restarts after a failure.
        backoff_limit: ``backoffLimit`` of each Job.
        namespace: ``metadata.namespace``.
        jobset_labels: Labels of the JobSet (e.g. ``kueue.x-k8s.io/queue-name``).
        jobset_annotations: Annotations of the JobSet.
        suspend: ``spec.suspend``.
        ttl_seconds_after_finished: Delete the JobSet that long after it finished.
        checkpoint_dir: Where the program keeps its checkpoints (an absolute path): exported
            as ``CHECKPOINT_DIR`` to every container, the mount path of the checkpoint volume.
        checkpoint_volume: What is mounted at ``checkpoint_dir``: the name of an existing
            PersistentVolumeClaim, or a volume source (``{"nfs": {...}}``, ``{"csi": ...}``).
        checkpoint_claim: A PersistentVolumeClaim spec for a claim of the JobSet's own
            (``volumeClaimPolicies``: created with it, kept through its restarts, deleted with
            it; controller backend only), mounted at ``checkpoint_dir``.
        inject_env: Give every container the workload's variables (:mod:`jobset_core.workload`).

    Returns:
        The JobSet.

    Examples:
        >>> js = jax_multislice(
        ...     "v6e", "us-docker.pkg.dev/cloud-tpu-images/jax-ai-image/tpu:latest",
        ...     ["python3", "train.py"], slices=2, hosts_per_slice=4,
        ...     topology_key="cloud.google.com/gke-nodepool", chips_per_host=4,
        ... )
        >>> js.replicated_jobs[0].replicas, js.replicated_jobs[0].template.spec["parallelism"]
        (2, 4)
    """
    _at_least(1, slices=slices, hosts_per_slice=hosts_per_slice)
    _check_checkpoint(checkpoint_dir, checkpoint_volume, checkpoint_claim)
    jobset = _jobset(
        name,
        namespace=namespace,
        jobset_labels=jobset_labels,
        jobset_annotations=jobset_annotations,
        coordinator=replicated_job,
        suspend=suspend,
        ttl_seconds_after_finished=ttl_seconds_after_finished,
        max_restarts=max_restarts,
    )
    endpoint = _endpoint(jobset)
    rank_env, exports = _rank("JAX_PROCESS_ID", slices, hosts_per_slice)
    container_env = [
        _name_env(),
        _env("JAX_COORDINATOR_ADDRESS", f"{endpoint}:{coordinator_port}"),
        _env("JAX_NUM_PROCESSES", str(slices * hosts_per_slice)),
        *rank_env,
        _env("NUM_SLICES", str(slices)),
        _env("HOSTS_PER_SLICE", str(hosts_per_slice)),
        _env_from("SLICE_ID", JOB_INDEX_FIELD),
        _env_from("HOST_ID", COMPLETION_INDEX_FIELD),
    ]
    if megascale:
        container_env += [
            _env("MEGASCALE_COORDINATOR_ADDRESS", endpoint),
            _env("MEGASCALE_PORT", str(megascale_port)),
            _env("MEGASCALE_NUM_SLICES", str(slices)),
            _env_from("MEGASCALE_SLICE_ID", JOB_INDEX_FIELD),
        ]
    container_env += _env_map(env)
    limits = {chip_resource: chips_per_host} if chips_per_host else {}
    container = _container(
        "jax",
        image,
        _launch(list(command), exports),
        container_env,
        resources=_merge_limits(resources, limits),
        ports=_ports("coordinator", coordinator_port),
    )
    template = _replicated_job(replicated_job, slices, hosts_per_slice, container, backoff_limit)
    _place(template, node_selector=node_selector, topology=topology_key)
    jobset["spec"]["replicatedJobs"] = [template]
    return _finish(jobset, checkpoint_dir, checkpoint_volume, checkpoint_claim, inject_env)
