"""What the release tests share: the tree's version, running a command, the built files."""

from __future__ import annotations

import ast
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _version() -> str:
    tree = ast.parse((ROOT / "jobset_core/_version.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "__version__":
            return str(ast.literal_eval(node.value))
    raise AssertionError("jobset_core/_version.py has no __version__")


VERSION = _version()


def _locked(package: str, lock: str = "airflow") -> str:
    text = (ROOT / "requirements" / f"{lock}.txt").read_text()
    match = re.search(rf"^{re.escape(package)}==(\S+)$", text, re.M)
    assert match, f"{package} is not in requirements/{lock}.txt"
    return match[1]


def _run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, **kwargs)
    assert proc.returncode == 0, (
        f"{shlex.join(cmd)} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    return proc


def _wheel(dist: Path) -> Path:
    (wheel,) = dist.glob("*.whl")
    return wheel


def _sdist(dist: Path) -> Path:
    (sdist,) = dist.glob("*.tar.gz")
    return sdist


@dataclass(frozen=True)
class End:
    lock: str  # requirements/<lock>.txt
    python: str  # the interpreter's X.Y

    @property
    def id(self) -> str:
        return f"{self.lock.removeprefix('core-')}-py{self.python}"


#: The machine's Python: every environment not listed in requirements/pythons.txt.
MACHINE_PYTHON = "3.11"


def pythons_of_environments() -> dict[str, list[str]]:
    """requirements/pythons.txt: environment -> the Pythons (X.Y) it is built or installed on."""
    listed = {}
    for line in (ROOT / "requirements/pythons.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            environment, *pythons = line.split()
            listed[environment] = pythons
    return listed


#: The two ends of every range: the floor on the machine's Python, the ceiling on each listed.
ENDS = (
    End("core-floor", MACHINE_PYTHON),
    *(End("core-ceiling", python) for python in pythons_of_environments()["core-ceiling"]),
)
#: The Pythons the package claims (its classifiers): every one some environment runs on.
TESTED_PYTHONS = {MACHINE_PYTHON} | {p for ps in pythons_of_environments().values() for p in ps}
