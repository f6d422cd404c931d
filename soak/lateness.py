"""Whose are a task's late seconds: ours (the waiter that gave the verdict, and the
operator's work after it) or Airflow's (the scheduler, the executor, the triggerer's
reassignment, the task's resumption, its bookkeeping).

A task is late from its JobSet's terminal condition to the task instance's end. The waiter
says its verdict in the try's log the moment it has it, in the judge's own words (``JobSet
NS/NAME completed (...)`` or ``JobSet NS/NAME failed: ...``): the operator in its task log
(worker mode), the trigger in the try's trigger log (deferred). Airflow's task runner marks
where the operator's code runs in the task log: after the ``::endgroup::`` of ``Pre
Execute``, until ``::group::Post Execute`` (or ``Task failed with exception``). So:

- **ours before the verdict**: from the terminal condition, or from the moment the waiter
  that said it began (the first line of its log file: a trigger reassigned after a triggerer
  restart, a try started after a killed one), whichever is later, to its verdict line;
- **ours after it**: the operator's code after the verdict (worker mode: from the line; a
  deferred task: from its resumption) until the task runner's end mark: deleting the run,
  the result, the failed pods' logs; and a trigger's hold of its event after the verdict
  (``the task resumes in N s``: it waits for Airflow's worker, but the wait is ours);
- **the cluster's**: the seconds of ours while the API server was down (the soak's restarts of
  it, from the stop until it answered again): no waiter gets an answer then, ours only from
  the moment it answers;
- **Airflow's**: the rest (before that waiter began; from a trigger's event to the task's
  resumption; from the end mark to the task instance's end).

The terminal condition's ``lastTransitionTime`` has whole seconds: a split is good to a
second. Pure but for reading the log files.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

__all__ = ["Said", "Split", "epoch", "said_in", "split"]


@dataclass(frozen=True)
class Said:
    """Where and when a try's waiter said the verdict."""

    at: float  # the verdict line
    began: float  # the first line of the file that holds it
    where: str  # ``task`` (worker mode) or ``trigger``
    resumed: float | None = None  # the operator's code began (again) before ``ended``
    ended: float | None = None  # the task runner's end mark after the verdict
    held: float = 0.0  # the trigger held its event this long after the verdict


@dataclass(frozen=True)
class Split:
    """A task's late seconds, split (seconds, rounded to tenths)."""

    ours: float
    airflow: float
    where: str
    cluster: float = 0.0  # what would have been ours, while the API server was down


def epoch(text: object) -> float | None:
    """An RFC 3339 time (the API's, Airflow's) in epoch seconds; ``None``: none or unreadable."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _lines(path: Path) -> list[tuple[float, str]]:
    """(timestamp, text) of a structured Airflow log file's lines (others are skipped)."""
    out: list[tuple[float, str]] = []
    try:
        raw = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return out
    for line in raw.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        at = epoch(record.get("timestamp"))
        if at is not None:
            out.append((at, str(record.get("event", ""))))
    return out


#: The task runner's marks around the operator's code (Airflow 3).
_PRE, _GROUP_END = "::group::Pre Execute", "::endgroup::"
_ENDS = ("::group::Post Execute", "Task failed with exception")


def said_in(folder: Path, try_number: int, namespace: str, prefix: str) -> Said | None:
    """The first verdict line of try ``try_number`` about a JobSet of ``namespace`` whose
    name starts with ``prefix``, in the task log and the trigger logs of that try, with the
    operator's run around it from the task log's marks."""
    verdict = re.compile(
        rf"JobSet {re.escape(namespace)}/{re.escape(prefix)}\S* (completed \(|failed: )"
    )
    found: list[Said] = []
    for path in sorted(folder.glob(f"attempt={try_number}.log*")):
        lines = _lines(path)
        where = "trigger" if ".trigger." in path.name else "task"
        for i, (at, text) in enumerate(lines):
            if verdict.search(text):
                held = _held(lines[i + 1 :]) if where == "trigger" else 0.0
                found.append(Said(at=at, began=lines[0][0], where=where, held=held))
                break
    said = min(found, key=lambda s: s.at, default=None)
    if said is None:
        return None
    resumed, ended = _operator_run(_lines(folder / f"attempt={try_number}.log"), said.at)
    return dataclasses.replace(said, resumed=resumed, ended=ended)


_HELD = re.compile(r"^the task resumes in (\d+(?:\.\d+)?)s")


def _held(lines: list[tuple[float, str]]) -> float:
    """The seconds a trigger said it holds its event, in the lines after its verdict."""
    for _, text in lines:
        if m := _HELD.match(text):
            return float(m.group(1))
    return 0.0


def _operator_run(lines: list[tuple[float, str]], after: float) -> tuple[float | None, ...]:
    """When the operator's code last began before its end mark that follows ``after``, and
    that end mark (``None``: not found)."""
    resumed, in_pre = None, False
    for at, text in lines:
        if text == _PRE:
            in_pre = True
        elif text == _GROUP_END and in_pre:
            resumed, in_pre = at, False
        elif text.startswith(_ENDS) and at >= after:
            return resumed, at
    return None, None


def split(
    terminal_at: float,
    ended: float,
    said: Said | None,
    outages: Sequence[tuple[float, float]] = (),
) -> Split | None:
    """The late seconds from ``terminal_at`` to ``ended``, split at the verdict line and
    at the operator's run after it; of what is ours, the seconds within ``outages`` (from,
    to: the API server down) are the cluster's."""
    if said is None:
        return None
    late = max(ended - terminal_at, 0.0)
    spans = [(max(terminal_at, said.began), said.at)]  # the waiter, to its verdict
    if said.ended is not None:  # the operator's code after it
        spans.append((max(said.at, said.resumed or said.at, terminal_at), said.ended))
    mine = sum(max(0.0, b - a) for a, b in spans) + said.held
    down = sum(_overlap(span, outage) for span in spans for outage in outages)
    ours = min(mine, late)
    cluster = min(down, ours)
    return Split(
        ours=round(ours - cluster, 1),
        airflow=round(late - ours, 1),
        where=said.where,
        cluster=round(cluster, 1),
    )


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> float:
    return max(0.0, min(a[1], b[1]) - max(a[0], b[0]))
