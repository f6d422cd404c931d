"""The docs generator (``scripts/docs_gen.py``, an mkdocs hook, not a package) loaded for the
docs tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def docs_gen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_gen", ROOT / "scripts/docs_gen.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
