"""One PNG chart per family of figures: a panel per measure, ours beside the anchors and the
floor (each panel on its own scale: a log scale where the values span orders of magnitude).

Needs matplotlib, which lives in the docs environment (``.venv/docs``: the one that renders
the docs page), not in the Airflow or KFP environments the tests run in. The charts are
outputs of ``make bench`` and are not committed (no binaries in the repository): the page
and the JSON are the record.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from benchmarks.report import FAMILY_TITLES, families
from benchmarks.results import Figure, Results

__all__ = ["draw", "panels"]

SERIES = (
    ("ours", "#3f51b5"),
    ("anchor", "#e0803c"),
    ("other anchor", "#f2c14e"),
    ("floor", "#9e9e9e"),
)


def _split(family: str, figure: Figure) -> tuple[str, str]:
    """(the measure, what this figure is of it): ``p50, worker (native)`` is the ``p50`` of
    ``worker (native)``; ``watches open (10 ns, x)`` the ``watches open`` of ``10 ns, x``."""
    name = figure.figure.split(": ", 1)[-1]
    if family == "detection" and ", " in name:
        measure, _, label = name.partition(", ")
        return measure, label
    measure, _, rest = name.partition(" (")
    return measure, rest.rstrip(")") or measure


def _values(figure: Figure) -> dict[str, float | None]:
    other = figure.params.get("other_anchor")
    first = next(iter(other.values()), None) if isinstance(other, dict) and other else None
    return {
        "ours": figure.ours,
        "anchor": figure.anchor,
        "other anchor": first,
        "floor": figure.floor,
    }


def panels(family: str, figures: list[Figure]) -> dict[str, list[tuple[str, Figure]]]:
    """The figures by measure, in order (pure)."""
    found: dict[str, list[tuple[str, Figure]]] = {}
    for figure in figures:
        measure, label = _split(family, figure)
        found.setdefault(measure, []).append((label, figure))
    return found


def _panel(ax: Any, measure: str, rows: list[tuple[str, Figure]]) -> None:
    bar = 0.8 / len(SERIES)
    shown: list[float] = []
    for index, (series, color) in enumerate(SERIES):
        ys, xs = [], []
        for i, (_, figure) in enumerate(rows):
            value = _values(figure)[series]
            if value is not None and value > 0 and math.isfinite(value):
                ys.append(i + (index - 1.5) * bar)
                xs.append(value)
        if xs:
            ax.barh(ys, xs, height=bar, label=series, color=color)
            shown += xs
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([label for label, _ in rows], fontsize=7)
    ax.invert_yaxis()
    if shown and max(shown) / min(shown) > 100:
        ax.set_xscale("log")
    ax.set_title(f"{measure} [{rows[0][1].unit}]", fontsize=8)
    ax.tick_params(axis="x", labelsize=7)
    ax.grid(axis="x", alpha=0.3)


def draw(results: Results, folder: Path) -> list[Path]:
    """Write ``<family>.png`` into ``folder`` for every family; the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for family, figures in families(results.figures).items():
        found = panels(family, figures)
        columns = 2 if len(found) > 1 else 1
        lines = (len(found) + columns - 1) // columns
        tallest = max(len(rows) for rows in found.values())
        fig, axes = plt.subplots(
            lines,
            columns,
            figsize=(6.5 * columns, 0.7 + lines * (1.0 + 0.28 * tallest)),
            squeeze=False,
        )
        for ax, (measure, rows) in zip(axes.flat, found.items(), strict=False):
            _panel(ax, measure, rows)
        for ax in list(axes.flat)[len(found) :]:
            ax.set_visible(False)
        handles = [Patch(color=color, label=series) for series, color in SERIES]
        fig.legend(handles=handles, loc="upper right", fontsize=8)
        title = FAMILY_TITLES.get(family, family)
        fig.suptitle(
            f"{title} ({results.profile} profile; shorter bars are better but for throughput)",
            fontsize=10,
        )
        fig.tight_layout(rect=(0, 0, 1, 0.97))
        path = folder / f"{family}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written
