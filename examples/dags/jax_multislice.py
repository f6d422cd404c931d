"""JAX across two TPU slices, one child Job per slice, each slice alone in its node pool.

``jax_multislice`` sets ``alpha.jobset.sigs.k8s.io/exclusive-topology`` to the node-pool label,
so the JobSet controller places each slice's Job in its own topology domain, and gives every
process ``JAX_COORDINATOR_ADDRESS``, ``JAX_PROCESS_ID`` and the megascale variables. Run weekly.
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
