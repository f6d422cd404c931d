"""One chart per family of figures: a panel per measure, ours beside the anchors and the
floor (each panel on its own scale: a log scale where the values span orders of magnitude).

One drawing, two formats: ``make bench`` writes PNGs (``benchmarks/results/*.png``), and the
docs build (``scripts/docs_gen.py``) renders SVGs in memory from the committed results file
into the site (``docs/benchmarks.md`` shows them). An SVG keeps its text as text (no glyph
outlines), carries no date and salts its ids with a constant: small, and the same bytes from
the same results.

Needs matplotlib, which lives in the docs environment (``.venv/docs``: the one that renders
the docs page), not in the Airflow or KFP environments the tests run in. No chart is
committed (no binaries or generated files in the repository): the page and the JSON are the
record.
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

from benchmarks.report import FAMILY_TITLES, families
from benchmarks.results import Figure, Results

__all__ = ["FORMATS", "draw", "panels", "render"]

#: The formats a chart is written in.
FORMATS = ("png", "svg")

#: Per format, the matplotlib settings and the ``savefig`` metadata: an SVG's text stays text
#: (the browser's sans-serif draws it), with no date, and its clip paths' ids are hashed
#: with a constant salt (matplotlib's default is a random one) so the same results make the
#: same bytes.
_RC: dict[str, dict[str, Any]] = {
    "png": {},
    "svg": {"svg.fonttype": "none", "svg.hashsalt": "jobset-bench"},
}
_METADATA: dict[str, dict[str, Any]] = {"png": {}, "svg": {"Date": None}}

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
        ax.minorticks_off()
    ax.set_title(f"{measure} [{rows[0][1].unit}]", fontsize=8)
    ax.tick_params(axis="x", labelsize=7)
    ax.grid(axis="x", alpha=0.3)


def _figure(plt: Any, family: str, figures: list[Figure], profile: str) -> Any:
    """The chart of one family, as a matplotlib figure."""
    from matplotlib.patches import Patch

    found = panels(family, figures)
    columns = 2 if len(found) > 1 else 1
    lines = (len(found) + columns - 1) // columns
    tallest = max(len(rows) for rows in found.values())
    fig, axes = plt.subplots(
        lines,
        columns,
        figsize=(6.5 * columns, 0.7 + lines * (1.0 + 0.28 * tallest)),
        squeeze=False,
        layout="constrained",
    )
    for ax, (measure, rows) in zip(axes.flat, found.items(), strict=False):
        _panel(ax, measure, rows)
    for ax in list(axes.flat)[len(found) :]:
        ax.set_visible(False)
    # The title, and the legend in one row under it, above the panels (never over one).
    title = FAMILY_TITLES.get(family, family)
    handles = [Patch(color=color, label=series) for series, color in SERIES]
    fig.legend(
        handles=handles,
        loc="outside upper center",
        ncols=len(SERIES),
        fontsize=8,
        frameon=False,
        title=f"{title} ({profile} profile; shorter bars are better but for throughput)",
        title_fontsize=10,
    )
    return fig


def render(results: Results, fmt: str = "svg") -> dict[str, bytes]:
    """Every family's chart as the bytes of a ``fmt`` file (one of :data:`FORMATS`), by
    family, in the order the families first appear; nothing is written."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown chart format {fmt!r} (known: {', '.join(FORMATS)})")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    charts = {}
    with matplotlib.rc_context(_RC[fmt]):
        for family, figures in families(results.figures).items():
            fig = _figure(plt, family, figures, results.profile)
            out = io.BytesIO()
            try:
                fig.savefig(out, format=fmt, dpi=100, metadata=_METADATA[fmt])
            finally:
                plt.close(fig)
            charts[family] = out.getvalue()
    return charts


def draw(results: Results, folder: Path, fmt: str = "png") -> list[Path]:
    """Write ``<family>.<fmt>`` into ``folder`` for every family; the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for family, data in render(results, fmt).items():
        path = folder / f"{family}.{fmt}"
        path.write_bytes(data)
        written.append(path)
    return written
