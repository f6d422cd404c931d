"""The charts draw, one per family, from a results file (the docs environment): PNGs for
``make bench``, small SVGs for the docs site (``scripts/docs_gen.py``)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from benchmarks.charts import SERIES, draw, render
from benchmarks.report import FAMILY_TITLES
from benchmarks.results import Figure, Results
from tests.docs._docs_gen import docs_gen

ROOT = Path(__file__).resolve().parents[2]
SVG = "{http://www.w3.org/2000/svg}"

#: Bytes of one chart of the small results below: measured 10.8 kB (native) to 22.0 kB
#: (scale, two panels) with matplotlib 3.11.
SMALL_CHART_BYTES = 40_000
#: Bytes of one chart of the committed results: measured 19.7 kB (checks) to 179 kB (scale:
#: 99 figures in 11 panels), 516 kB in all, with matplotlib 3.11.
CHART_BYTES = 256 * 1024
ALL_CHARTS_BYTES = 1024 * 1024


def _results() -> Results:
    results = Results(profile="smoke")
    results.add(
        [
            Figure.of("scale: watches open (1 ns, x)", "watches", 4.0, 0.0, floor=3.0),
            Figure.of("scale: RSS per waiting task (1 ns, x)", "KiB", 12.0, 190.0),
            Figure.of("local: validate one JobSet in-process (p50)", "ms", 3.5, 11.0),
            Figure.of("native: fan-out", "s", None, 5.3),
        ]
    )
    return results


def _texts(svg: bytes) -> list[str]:
    """The text the SVG shows, one string per text element (it parses as XML)."""
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return ["".join(e.itertext()) for e in root.iter(f"{SVG}text")]


def test_one_png_per_family(tmp_path: Path) -> None:
    written = draw(_results(), tmp_path)
    assert sorted(p.name for p in written) == ["local.png", "native.png", "scale.png"]
    for path in written:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert path.stat().st_size > 5000


def test_one_small_svg_per_family() -> None:
    charts = render(_results(), "svg")
    assert list(charts) == ["scale", "local", "native"]
    panels = {
        "scale": ["watches open [watches]", "1 ns, x", "RSS per waiting task [KiB]"],
        "local": ["validate one JobSet in-process [ms]", "p50"],
        "native": ["fan-out [s]"],
    }
    for family, svg in charts.items():
        texts = _texts(svg)
        for series, _ in SERIES:  # ours, the anchors and the floor, named in the legend
            assert series in texts, (family, series)
        for label in panels[family]:
            assert label in texts, (family, label)
        assert any(t.startswith(f"{FAMILY_TITLES[family]} (smoke profile;") for t in texts)
        # Text as text (no glyph outlines embedded), no date: small, and the same bytes again.
        assert not re.search(rb'<path id="DejaVu', svg)
        assert b"<dc:date>" not in svg
        assert len(svg) < SMALL_CHART_BYTES, (family, len(svg))
    assert render(_results(), "svg") == charts


def test_the_docs_site_gets_a_chart_for_every_link_of_the_page() -> None:
    """The docs hook draws, from the committed results, the SVGs the committed page shows."""
    charts = docs_gen().benchmark_charts()
    page = (ROOT / "docs/benchmarks.md").read_text(encoding="utf-8")
    shown = re.findall(r"^\[!\[[^\]]+\]\((benchmarks/\w+\.svg)\)\]\(\1\)$", page, re.M)
    assert shown and sorted(charts) == sorted(shown)
    for uri, svg in charts.items():
        assert "ours" in _texts(svg), uri
        assert len(svg) < CHART_BYTES, (uri, len(svg))
    assert sum(len(svg) for svg in charts.values()) < ALL_CHARTS_BYTES
