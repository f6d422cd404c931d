"""JAX across two TPU slices, one child Job per slice, each slice alone in its node pool.

``jax_multislice`` sets ``alpha.jobset.sigs.k8s.io/exclusive-topology`` to the node-pool label,
so the JobSet controller places each slice's Job in its own topology domain, and gives every
process ``JAX_COORDINATOR_ADDRESS``, ``JAX_PROCESS_ID`` and the megascale variables. Run weekly.

On GKE each slice is a multi-host TPU slice: here TPU v5e in a 2x4 topology, two hosts of four
chips (``ct5lp-hightpu-4t`` node pools). The node selectors are the labels GKE puts on TPU
nodes; requesting ``google.com/tpu`` lets GKE add the toleration of the TPU nodes' taint
(``google.com/tpu=present:NoSchedule``) by itself. Change the accelerator, topology and chips
to your slices'.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import dag

from airflow_provider_jobset.operators import JobSetOperator
from jobset_core import jax_multislice

jobset = jax_multislice(
    "jax-pretrain",
    "us-docker.pkg.dev/cloud-tpu-images/jax-stable-stack/tpu:latest",
    ["python", "-m", "pretrain", "--steps", "1000"],
    slices=2,
    hosts_per_slice=2,
    topology_key="cloud.google.com/gke-nodepool",
    chips_per_host=4,
    node_selector={
        "cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice",
        "cloud.google.com/gke-tpu-topology": "2x4",
    },
    max_restarts=1,
)


@dag(schedule="@weekly", start_date=datetime(2026, 1, 1), catchup=False, tags=["jobset", "example"])
def jax_multislice_pretraining():
    JobSetOperator(
        task_id="pretrain",
        jobset=jobset,
        backend="controller",  # exclusive placement is the controller's pod webhook
        timeout=timedelta(hours=12),
        log_replicated_job="slice",
    )


jax_multislice_pretraining()
