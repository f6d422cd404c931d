"""Data-parallel JAX training across the pods of a JobSet, with checkpoint resume.

The program the ``scheduled_retraining`` example runs in each pod of its ``jax_multislice``
JobSet (it is baked into the devcluster's image ``devcluster.local/python-jax:1`` as
``/opt/jobset-examples/jax_train.py``). A linear model is fitted to the dataset that the DAG's
``prepare`` task wrote; every process holds one shard of each batch, and XLA averages the
gradients across processes (gloo CPU collectives, no accelerator needed).

What it reads, all set by the builder or the pod template:

* ``JAX_COORDINATOR_ADDRESS`` / ``JAX_NUM_PROCESSES`` / ``JAX_PROCESS_ID``: the rendezvous
  (the coordinator is pod 0, reached by its headless-Service DNS name);
* ``JOBSET_RESTART_ATTEMPT``: which attempt of the JobSet this is (the pod label
  ``jobset.sigs.k8s.io/restart-attempt`` through the downward API).

Every ``--checkpoint-every`` steps process 0 writes the parameters to ``--checkpoint-dir``
(a volume both attempts see); a new attempt starts from the newest checkpoint and says so.
``--fail-at-step`` makes process ``--fail-process`` exit with code ``--fail-exit-code`` at that
step on attempt ``--fail-on-attempt`` only: the JobSet restarts and the next attempt resumes.
At the end process 0 writes its metrics as JSON to ``/dev/termination-log``: that is the
task's result.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="dataset folder (meta.json, x.f32, y.f32)")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--batch", type=int, default=256, help="global batch size")
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--checkpoint-dir", required=True)
    ap.add_argument("--checkpoint-every", type=int, default=10)
    ap.add_argument("--fail-at-step", type=int, default=-1)
    ap.add_argument("--fail-on-attempt", type=int, default=0)
    ap.add_argument("--fail-process", type=int, default=1)
    ap.add_argument("--fail-exit-code", type=int, default=1)
    ap.add_argument("--step-seconds", type=float, default=0.0, help="pause after each step")
    ap.add_argument("--termination-log", default="/dev/termination-log")
    return ap.parse_args(argv)


def load_dataset(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    meta = json.loads((folder / "meta.json").read_text())
    n, d = int(meta["rows"]), int(meta["features"])
    x = np.fromfile(folder / "x.f32", dtype="<f4").reshape(n, d)
    y = np.fromfile(folder / "y.f32", dtype="<f4").reshape(n)
    return x, y


def latest_checkpoint(folder: Path) -> Path | None:
    found = sorted(folder.glob("step-*.npz"))
    return found[-1] if found else None


def save_checkpoint(folder: Path, step: int, params: dict[str, np.ndarray]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"step-{step:06d}.npz"
    tmp = folder / f".step-{step:06d}.tmp.npz"
    np.savez(tmp, step=step, **params)
    os.replace(tmp, final)
    for old in sorted(folder.glob("step-*.npz"))[:-2]:
        old.unlink()
    return final


class Run:
    """One process of the training: who it is, and how it reports."""

    def __init__(self) -> None:
        self.attempt = int(os.environ.get("JOBSET_RESTART_ATTEMPT") or 0)
        self.coordinator = os.environ["JAX_COORDINATOR_ADDRESS"]
        self.processes = int(os.environ["JAX_NUM_PROCESSES"])
        self.rank = int(os.environ["JAX_PROCESS_ID"])
        self.started = time.monotonic()

    def say(self, message: str) -> None:
        print(
            f"[attempt {self.attempt} process {self.rank}/{self.processes}] {message}", flush=True
        )

    def join(self) -> None:
        self.say(f"joining the coordinator {self.coordinator}")
        jax.distributed.initialize(
            coordinator_address=self.coordinator,
            num_processes=self.processes,
            process_id=self.rank,
            initialization_timeout=180,
        )
        self.say(
            f"rendezvous done in {time.monotonic() - self.started:.1f}s: "
            f"{jax.process_count()} processes, devices {[d.id for d in jax.devices()]}"
        )


def restore(run: Run, folder: Path, features: int) -> tuple[int, dict[str, np.ndarray]]:
    """The step to start at and the parameters: from the newest checkpoint, else zeros."""
    found = latest_checkpoint(folder)
    if found is None:
        run.say("no checkpoint yet: starting at step 0")
        return 0, {"w": np.zeros(features, np.float32), "b": np.zeros((), np.float32)}
    with np.load(found) as saved:
        step, params = int(saved["step"]), {"w": saved["w"], "b": saved["b"]}
    run.say(f"resumed from checkpoint {found.name}: continuing at step {step}")
    return step, params


def make_step(lr: float):
    def loss_fn(p: dict, xb: jax.Array, yb: jax.Array) -> jax.Array:
        return jnp.mean((xb @ p["w"] + p["b"] - yb) ** 2)

    @jax.jit
    def train_step(p: dict, xb: jax.Array, yb: jax.Array) -> tuple[dict, jax.Array]:
        # the batch is sharded across the processes: the mean (and its gradient) is a
        # cross-process all-reduce inserted by XLA
        loss, grads = jax.value_and_grad(loss_fn)(p, xb, yb)
        return jax.tree.map(lambda v, g: v - lr * g, p, grads), loss

    return train_step


def train(run: Run, args: argparse.Namespace) -> dict:
    x_all, y_all = load_dataset(Path(args.data))
    mesh = Mesh(np.array(jax.devices()), ("data",))
    sharded = NamedSharding(mesh, P("data"))
    per_process = args.batch // run.processes
    ckpt_dir = Path(args.checkpoint_dir)
    start_step, params = restore(run, ckpt_dir, x_all.shape[1])
    state = jax.device_put(params, NamedSharding(mesh, P()))
    train_step = make_step(args.lr)
    rows = x_all.shape[0]
    loss_value = float("nan")
    for step in range(start_step, args.steps):
        failing = run.attempt == args.fail_on_attempt and run.rank == args.fail_process
        if step == args.fail_at_step and failing:
            run.say(f"simulated failure at step {step} (exit {args.fail_exit_code})")
            os._exit(args.fail_exit_code)
        # each process takes its own slice of this step's global batch
        lo = (step * args.batch + run.rank * per_process) % (rows - per_process)
        xb = jax.make_array_from_process_local_data(sharded, x_all[lo : lo + per_process])
        yb = jax.make_array_from_process_local_data(sharded, y_all[lo : lo + per_process])
        state, loss = train_step(state, xb, yb)
        loss_value = float(loss)
        done = step + 1
        run.say(f"step {done}/{args.steps} loss={loss_value:.4f}")
        if run.rank == 0 and (done % args.checkpoint_every == 0 or done == args.steps):
            host = {k: np.asarray(v) for k, v in state.items()}
            run.say(f"checkpoint {save_checkpoint(ckpt_dir, done, host).name}")
        if args.step_seconds:
            time.sleep(args.step_seconds)
    return {
        "final_loss": round(loss_value, 6),
        "steps": args.steps,
        "resumed_from_step": start_step,
        "restart_attempt": run.attempt,
        "processes": run.processes,
        "seconds": round(time.monotonic() - run.started, 1),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    run = Run()
    run.join()
    result = train(run, args)
    run.say(f"done: {json.dumps(result)}")
    if run.rank == 0:
        with open(args.termination_log, "w") as f:
            f.write(json.dumps(result))
    jax.distributed.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
