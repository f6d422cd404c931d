"""One PNG chart per family of figures: ours, the anchor and the floor side by side.

Needs matplotlib, which lives in the docs environment (``.venv/docs``: the one that renders
the docs page), not in the Airflow or KFP environments the tests run in. The charts are
outputs of ``make bench`` and are not committed (no binaries in the repository): the page
and the JSON are the record.
"""

from __future__ import annotations

import math
from pathlib import Path

from benchmarks.report import FAMILY_TITLES, families
from benchmarks.results import Figure, Results

__all__ = ["draw"]


def _values(figures: list[Figure]) -> list[tuple[str, float | None, float | None, float | None]]:
    return [(f.figure.split(": ", 1)[-1], f.ours, f.anchor, f.floor) for f in figures]


def draw(results: Results, folder: Path) -> list[Path]:
    """Write ``<family>.png`` into ``folder`` for every family; the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for family, figures in families(results.figures).items():
        rows = _values(figures)
        height = 0.9 + 0.42 * len(rows)
        fig, ax = plt.subplots(figsize=(11, height))
        bar = 0.27
        series = (("ours", 1, "#3f51b5"), ("anchor", 2, "#e0803c"), ("floor", 3, "#9e9e9e"))
        positive = [v for r in rows for v in r[1:] if v is not None and v > 0]
        for label, index, color in series:
            ys, xs = [], []
            for i, row in enumerate(rows):
                value = row[index]
                if value is not None and value > 0 and math.isfinite(value):
                    ys.append(i + (index - 2) * bar)
                    xs.append(value)
            if xs:
                ax.barh(ys, xs, height=bar, label=label, color=color)
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels(
            [f"{r[0]} [{f.unit}]" for r, f in zip(rows, figures, strict=True)], fontsize=7
        )
        ax.invert_yaxis()
        if positive and max(positive) / min(positive) > 100:
            ax.set_xscale("log")
        ax.set_title(
            f"{FAMILY_TITLES.get(family, family)} ({results.profile} profile)", fontsize=10
        )
        ax.legend(fontsize=7, loc="lower right")
        ax.grid(axis="x", alpha=0.3)
        fig.tight_layout()
        path = folder / f"{family}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written
