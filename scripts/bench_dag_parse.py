"""What a JobSet given as YAML text costs a DAG parse (``JobSetOperator`` reads it at
construction for its retries), next to the YAML parse alone; and what an alias bomb costs.

Run with ``make bench``. Prints milliseconds per call (best of 5 rounds); asserts nothing.
"""

from __future__ import annotations

import timeit

import yaml

from airflow_provider_jobset.operators import _parse_time_source
from jobset_core import dump_yaml, pytorch_ddp


def _best(call: object, number: int = 100) -> float:
    times = timeit.repeat(call, number=number, repeat=5)  # type: ignore[arg-type]
    return min(times) / number * 1e3


def main() -> None:
    jobset = pytorch_ddp(
        "ddp", "torch", ["train.py"], nodes=4, procs_per_node=8, gpus_per_node=8, max_restarts=3
    )
    text = dump_yaml(jobset)
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for level, previous in zip("bcdefghij", "abcdefghi", strict=True):
        lines.append(f"{level}: &{level} [{', '.join(['*' + previous] * 9)}]")
    bomb = "\n".join(lines) + "\n"
    parse = _best(lambda: yaml.safe_load(text))
    construct = _best(lambda: _parse_time_source(text))
    print(f"JobSet of {len(text)} bytes: yaml.safe_load {parse:.2f} ms")
    print(f"JobSetOperator's parse-time read of it: {construct:.2f} ms ({construct / parse:.2f}x)")
    bombed = _best(lambda: _parse_time_source(bomb))
    print(f"alias bomb of 9 levels (9**10 nodes expanded): {bombed:.2f} ms")


if __name__ == "__main__":
    main()
