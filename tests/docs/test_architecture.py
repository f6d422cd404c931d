"""docs/architecture.md stays true to the code: its layer chart is the one the import contracts
draw, and the names it gives the door, the request and the composition exist."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"


def _chart_module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("layers_chart", ROOT / "scripts/layers_chart.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["layers_chart"] = module
    spec.loader.exec_module(module)
    return module


def test_the_layer_chart_is_drawn_from_the_import_contracts() -> None:
    charts = _chart_module()
    text = PAGE.read_text(encoding="utf-8")
    assert charts.page_with(text, charts.chart()) == text, (
        "docs/architecture.md's layer chart differs from .importlinter: "
        "run python3 scripts/layers_chart.py --write"
    )


def test_the_chart_changes_with_the_contracts(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    charts = _chart_module()
    contracts = (ROOT / ".importlinter").read_text(encoding="utf-8")
    (tmp_path / ".importlinter").write_text(contracts.replace("    observe\n", ""), "utf-8")
    monkeypatch.setattr(charts, "ROOT", tmp_path)
    assert "jobset_core: observe" not in charts.chart()


def test_the_names_the_page_gives_exist() -> None:
    from jobset_core import lifecycle

    for name in ("RunRequest", "Deadline", "Lifecycle", "Runs", "session", "blocking", "prepare"):
        assert f"`{name}" in PAGE.read_text(encoding="utf-8"), name
        assert hasattr(lifecycle, name), name
    for method in ("prepare", "start", "wait", "complete", "execute", "cancel"):
        assert callable(getattr(lifecycle.Lifecycle, method)), method
