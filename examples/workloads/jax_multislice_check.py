"""Every process of a multislice JobSet joins JAX, says who it is, and reduces with the others.

The program each pod of a ``jax_multislice`` JobSet runs in the real-node test of several slices
(baked into the devcluster's image ``devcluster.local/python-jax:1`` as
``/opt/jobset-examples/jax_multislice_check.py``). It trains nothing: it shows that the
variables the builder sets bring every process of every slice into one JAX runtime.

What it reads, all set by the builder:

* ``JAX_COORDINATOR_ADDRESS`` / ``JAX_NUM_PROCESSES`` / ``JAX_PROCESS_ID``: the rendezvous
  (the coordinator is pod 0 of slice 0, reached by its headless-Service DNS name);
* ``NUM_SLICES`` / ``HOSTS_PER_SLICE`` / ``SLICE_ID`` / ``HOST_ID`` (and ``MEGASCALE_SLICE_ID``
  when the builder exports the megascale variables): the process's place.

Each process takes a token that only it knows (from its pod's UID, ``POD_UID``, when the pod
template passes it through the downward API, else a random one), joins (``jax.distributed``
over the CPU backend's gloo collectives), and then:

* gathers ``(process index, slice, host, token)`` from every process
  (``multihost_utils.process_allgather``);
* ``psum``s the tokens over a ``(slice, host)`` device mesh laid out by process index: over
  the whole mesh, and over ``host`` alone (the sum of its own slice's tokens).

Only processes that really exchanged data can report the others' tokens and their sums. Each
process writes what it saw as JSON to ``/dev/termination-log`` (every pod, not only pod 0), and
prints it.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import sys
import time

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

#: Names of the environment variables reported back as the process saw them.
ENV = (
    "JAX_COORDINATOR_ADDRESS",
    "JAX_NUM_PROCESSES",
    "JAX_PROCESS_ID",
    "NUM_SLICES",
    "HOSTS_PER_SLICE",
    "SLICE_ID",
    "HOST_ID",
    "MEGASCALE_SLICE_ID",
    "MEGASCALE_NUM_SLICES",
    "POD_UID",
)


def say(rank: int, message: str) -> None:
    print(f"[process {rank}] {message}", flush=True)


def uid_token(uid: str | None) -> int:
    """24 bits of the pod's UID (or random ones), plus 1: a few of them sum well inside int32."""
    if uid:
        return int(uid.replace("-", "")[:6], 16) + 1
    return secrets.randbelow(2**24) + 1


def reduce_tokens(token: int, slices: int, hosts: int) -> tuple[int, int]:
    """The sum of every process's token, and of the tokens of this process's slice: ``psum``
    over a ``(slice, host)`` mesh whose device ``[s, h]`` is process ``s * hosts + h``'s."""
    devices = sorted(jax.devices(), key=lambda d: (d.process_index, d.id))
    mesh = Mesh(np.array(devices).reshape(slices, hosts), ("slice", "host"))
    tokens = jax.make_array_from_process_local_data(
        NamedSharding(mesh, P("slice", "host")), np.array([[token]], np.int32)
    )

    def sums(block: jax.Array) -> tuple[jax.Array, jax.Array]:
        return jax.lax.psum(block, ("slice", "host")), jax.lax.psum(block, "host")

    total, per_slice = jax.jit(
        jax.shard_map(
            sums,
            mesh=mesh,
            in_specs=P("slice", "host"),
            out_specs=(P(), P("slice")),
        )
    )(tokens)
    # Both are replicated over the devices that computed them: read this process's copy.
    mine = (total.addressable_shards[0].data, per_slice.addressable_shards[0].data)
    return int(np.asarray(mine[0]).item()), int(np.asarray(mine[1]).item())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--termination-log", default="/dev/termination-log")
    args = ap.parse_args(argv)
    env = {name: os.environ.get(name) for name in ENV}
    rank, processes = int(os.environ["JAX_PROCESS_ID"]), int(os.environ["JAX_NUM_PROCESSES"])
    slices, hosts = int(os.environ["NUM_SLICES"]), int(os.environ["HOSTS_PER_SLICE"])
    slice_id, host_id = int(os.environ["SLICE_ID"]), int(os.environ["HOST_ID"])
    coordinator = os.environ["JAX_COORDINATOR_ADDRESS"]
    token = uid_token(os.environ.get("POD_UID"))
    started = time.monotonic()
    say(rank, f"slice {slice_id} host {host_id}: joining the coordinator {coordinator}")
    jax.distributed.initialize(
        coordinator_address=coordinator,
        num_processes=processes,
        process_id=rank,
        initialization_timeout=120,
    )
    say(
        rank,
        f"rendezvous done in {time.monotonic() - started:.1f}s: "
        f"{jax.process_count()} processes, {jax.device_count()} devices",
    )
    row = np.array([jax.process_index(), slice_id, host_id, token], np.int32)
    gathered = np.asarray(multihost_utils.process_allgather(row)).tolist()
    total, slice_total = reduce_tokens(token, slices, hosts)
    report = {
        "process_index": jax.process_index(),
        "process_count": jax.process_count(),
        "device_count": jax.device_count(),
        "env": env,
        "hostname": socket.gethostname(),
        "coordinator_ip": socket.gethostbyname(coordinator.rsplit(":", 1)[0]),
        "token": token,
        "gathered": gathered,
        "total": total,
        "slice_total": slice_total,
    }
    say(rank, f"report: {json.dumps(report)}")
    with open(args.termination_log, "w") as f:
        f.write(json.dumps(report))
    jax.distributed.shutdown()  # waits for every process: the coordinator goes last
    return 0


if __name__ == "__main__":
    sys.exit(main())
