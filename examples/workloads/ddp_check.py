"""Every process of a ``pytorch_ddp`` JobSet joins one gloo process group and reduces.

The program each worker of a ``pytorch_ddp`` JobSet runs under ``torchrun`` in the real-node
test (baked into the devcluster's image ``devcluster.local/python-torch:1`` as
``/opt/jobset-examples/ddp_check.py``). It trains nothing: it shows that the variables and the
``torchrun`` command line the builder writes bring every process of every pod into one
``torch.distributed`` world, with the ranks the pods' indexes give.

What it reads:

* from ``torchrun``: ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``,
  ``GROUP_RANK`` (the pod's node rank), ``GROUP_WORLD_SIZE``, ``MASTER_ADDR``/``MASTER_PORT``
  (the process group's rendezvous, ``init_method="env://"``);
* from the builder: ``NODE_RANK``, ``NNODES``, ``NPROC_PER_NODE``;
* ``POD_UID`` when the pod template passes the pod's UID through the downward API.

Each process takes a token that only it knows (24 bits of its pod's UID, its local rank, else
random ones), joins the gloo process group, and then:

* ``all_gather``s ``(rank, group rank, local rank, token)`` from every process;
* ``all_reduce``s (sum) the tokens;
* takes one step of a ``DistributedDataParallel`` model whose local gradient is its token:
  DDP's gradient all-reduce leaves every process the mean of all tokens.

Only processes that really exchanged data can report the others' tokens, their sum and their
mean. Every process prints its report as JSON (``report: {...}``); each pod's local rank 0
gathers its pod's reports and writes them, a JSON list, to ``/dev/termination-log``.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import sys
import time
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

#: Names of the environment variables reported back as the process saw them.
ENV = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "NODE_RANK",
    "NNODES",
    "NPROC_PER_NODE",
    "POD_UID",
)


def say(rank: int, message: str) -> None:
    print(f"[rank {rank}] {message}", flush=True)


def uid_token(uid: str | None, local_rank: int) -> int:
    """24 bits of the pod's UID (or random ones) times 4, plus the local rank, plus 1: unique
    per process of a pod (up to 4 per pod), and a few of them sum exactly in int64 and float64."""
    base = int(uid.replace("-", "")[:6], 16) if uid else secrets.randbelow(2**24)
    return base * 4 + local_rank + 1


def ddp_mean(token: int) -> float:
    """One backward pass of a DDP-wrapped ``Linear(1, 1)`` fed this process's token: the local
    gradient of its weight is the token, and DDP's all-reduce averages it over the world."""
    torch.manual_seed(0)  # DDP broadcasts rank 0's parameters anyway
    model = DistributedDataParallel(torch.nn.Linear(1, 1, bias=False).double())
    model(torch.tensor([[float(token)]], dtype=torch.float64)).sum().backward()
    grad = next(model.parameters()).grad
    assert grad is not None
    return float(grad.item())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--termination-log", default="/dev/termination-log")
    args = ap.parse_args(argv)
    env = {name: os.environ.get(name) for name in ENV}
    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    token = uid_token(os.environ.get("POD_UID"), local_rank)
    master = os.environ["MASTER_ADDR"]
    started = time.monotonic()
    say(rank, f"node {env['GROUP_RANK']} local rank {local_rank}: joining {master}")
    dist.init_process_group("gloo", init_method="env://")
    world = dist.get_world_size()
    say(rank, f"process group ready in {time.monotonic() - started:.1f}s: {world} processes")

    row = torch.tensor([dist.get_rank(), int(env["GROUP_RANK"] or -1), local_rank, token])
    rows = [torch.zeros(4, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(rows, row)
    total = torch.tensor([token], dtype=torch.int64)
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    report = {
        "rank": dist.get_rank(),
        "world_size": world,
        "backend": dist.get_backend(),
        "env": env,
        "hostname": socket.gethostname(),
        "master_ip": socket.gethostbyname(master),
        "token": token,
        "gathered": [r.tolist() for r in rows],
        "total": int(total.item()),
        "ddp_mean": ddp_mean(token),
    }
    say(rank, f"report: {json.dumps(report)}")
    reports: list[dict[str, Any] | None] = [None] * world
    dist.all_gather_object(reports, report)
    if local_rank == 0:
        mine = [r for r in reports if r and r["env"]["GROUP_RANK"] == env["GROUP_RANK"]]
        with open(args.termination_log, "w") as f:
            f.write(json.dumps(sorted(mine, key=lambda r: r["rank"]), separators=(",", ":")))
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
