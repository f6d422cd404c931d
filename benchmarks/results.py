"""What a benchmark run produces: figures, and the machine they were measured on (pure).

A :class:`Figure` is one number of ours beside its anchor measured in the same run (and a
floor where one exists). :class:`Results` is the list of figures plus the machine's load
before and after, written as ``benchmarks/results/latest.json``.
"""

from __future__ import annotations

import json
import math
import os
import platform
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Figure", "Results", "machine_load", "ratio"]


def ratio(ours: float | None, anchor: float | None) -> float | None:
    """``ours / anchor`` (``None`` when either is missing or the anchor is 0)."""
    if ours is None or anchor is None or anchor == 0:
        return None
    return ours / anchor


def _clean(value: Any) -> Any:
    """JSON-safe numbers (NaN and infinities become ``None``), rounded to 6 significant
    digits so a results file diffs readably."""
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return float(f"{value:.6g}")
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


@dataclass(frozen=True)
class Figure:
    """One measured figure.

    Attributes:
        figure: Its name: ``family: what (setting)``.
        unit: The unit of ``ours``, ``anchor`` and ``floor``.
        ours: Our value.
        anchor: The anchor's value, measured in the same run (its name is ``params["anchor"]``).
        ratio: ``ours / anchor``.
        floor: What the same job costs done by hand (``params["floor"]`` names it), if any.
        n: How many samples each value summarises.
        params: How it was measured (sizes, windows, the anchor's and floor's names, ...).
    """

    figure: str
    unit: str
    ours: float | None
    anchor: float | None
    floor: float | None = None
    n: int = 1
    params: Mapping[str, Any] = field(default_factory=dict)
    ratio: float | None = None

    @classmethod
    def of(
        cls,
        figure: str,
        unit: str,
        ours: float | None,
        anchor: float | None,
        *,
        floor: float | None = None,
        n: int = 1,
        **params: Any,
    ) -> Figure:
        """A figure with its ratio computed."""
        return cls(figure, unit, ours, anchor, floor, n, params, ratio(ours, anchor))

    @property
    def family(self) -> str:
        """The family (the part of the name before the colon)."""
        return self.figure.split(":", 1)[0]

    def to_json(self) -> dict[str, Any]:
        """The JSON record (the keys in the documented order)."""
        data = asdict(self)
        keys = ("figure", "unit", "ours", "anchor", "ratio", "floor", "n", "params")
        return {k: _clean(data[k]) for k in keys}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Figure:
        """Read a record back."""
        return cls(
            figure=data["figure"],
            unit=data["unit"],
            ours=data.get("ours"),
            anchor=data.get("anchor"),
            floor=data.get("floor"),
            n=int(data.get("n", 1)),
            params=dict(data.get("params") or {}),
            ratio=data.get("ratio"),
        )


def machine_load() -> dict[str, Any]:
    """The machine right now: load averages, CPUs, memory available (Linux)."""
    one, five, fifteen = os.getloadavg()
    available = None
    try:
        for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
    except OSError:
        pass
    return {
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "loadavg": [one, five, fifteen],
        "cpus": os.cpu_count(),
        "mem_available_bytes": available,
    }


@dataclass
class Results:
    """A run's figures and the machine around them."""

    profile: str
    figures: list[Figure] = field(default_factory=list)
    machine: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)

    def add(self, figures: Iterable[Figure]) -> None:
        """Append figures."""
        self.figures.extend(figures)

    def to_json(self) -> dict[str, Any]:
        """The whole file."""
        return {
            "profile": self.profile,
            "machine": _clean(self.machine),
            "notes": list(self.notes),
            "settings": _clean(self.settings),
            "figures": [f.to_json() for f in self.figures],
        }

    def write(self, path: Path) -> None:
        """Write the JSON file (atomically)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=1) + "\n", encoding="utf-8")
        tmp.replace(path)

    @classmethod
    def read(cls, path: Path) -> Results:
        """Read a results file."""
        data = json.loads(path.read_text(encoding="utf-8"))
        return cls(
            profile=data.get("profile", "?"),
            figures=[Figure.from_json(f) for f in data.get("figures", [])],
            machine=dict(data.get("machine") or {}),
            notes=list(data.get("notes") or []),
            settings=dict(data.get("settings") or {}),
        )


def describe_machine() -> dict[str, Any]:
    """What the machine is (for the report's header)."""
    return {
        "python": platform.python_version(),
        "system": f"{platform.system()} {platform.release()}",
        "cpus": os.cpu_count(),
    }
