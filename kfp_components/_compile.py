"""Regenerate the checked-in compiled forms: ``python -m kfp_components._compile``.

Writes ``kfp_components/launch_jobset.yaml``, ``kfp_components/cleanup_jobsets.yaml`` and the
golden IR of the example pipeline (``tests/kfp/golden/scheduled_retraining.yaml``, with the SDK
version stripped); ``tests/kfp/test_kfp_compile.py`` fails when any of them is stale.
"""

from __future__ import annotations

import re
import runpy
import tempfile
from pathlib import Path

from kfp import compiler

from kfp_components.components import cleanup_jobsets, launch_jobset

PACKAGE = Path(__file__).resolve().parent
ROOT = PACKAGE.parent


def _normalised(text: str) -> str:
    text = re.sub(r"(?m)^sdkVersion: .*\n", "", text)
    return re.sub(r"kfp==\d+(\.\d+)*", "kfp==<sdk>", text)


def main() -> None:
    """Compile every checked-in form."""
    for name, component in (("launch_jobset", launch_jobset), ("cleanup_jobsets", cleanup_jobsets)):
        compiler.Compiler().compile(component, str(PACKAGE / f"{name}.yaml"))
    example = ROOT / "examples" / "pipelines" / "scheduled_retraining.py"
    golden = ROOT / "tests" / "kfp" / "golden" / "scheduled_retraining.yaml"
    if example.is_file() and golden.parent.is_dir():
        pipeline = runpy.run_path(str(example), run_name="example")["scheduled_retraining"]
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "ir.yaml"
            compiler.Compiler().compile(pipeline, str(out))
            golden.write_text(_normalised(out.read_text(encoding="utf-8")), encoding="utf-8")


if __name__ == "__main__":
    main()
