"""The charts draw, one PNG per family, from a results file (the docs environment)."""

from __future__ import annotations

from pathlib import Path

from benchmarks.charts import draw
from benchmarks.results import Figure, Results


def test_one_png_per_family(tmp_path: Path) -> None:
    results = Results(profile="smoke")
    results.add(
        [
            Figure.of("scale: watches open (1 ns, x)", "watches", 4.0, 0.0, floor=3.0),
            Figure.of("scale: RSS per waiting task (1 ns, x)", "KiB", 12.0, 190.0),
            Figure.of("local: validate one JobSet in-process (p50)", "ms", 3.5, 11.0),
            Figure.of("native: fan-out", "s", None, 5.3),
        ]
    )
    written = draw(results, tmp_path)
    assert sorted(p.name for p in written) == ["local.png", "native.png", "scale.png"]
    for path in written:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert path.stat().st_size > 5000
