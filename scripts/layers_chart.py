"""The layer chart of docs/architecture.md, drawn from the import contracts (`.importlinter`).

`python3 scripts/layers_chart.py` prints the chart; `--write` puts it into
docs/architecture.md between its markers. tests/docs/test_architecture.py keeps the page equal
to what this draws, so the picture changes only with the contracts it shows.
"""

from __future__ import annotations

import configparser
import itertools
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"
BEGIN = "<!-- layers: drawn by scripts/layers_chart.py from .importlinter; do not edit -->"
END = "<!-- /layers -->"


def _contracts() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(ROOT / ".importlinter", encoding="utf-8")
    return parser


def _lines(value: str) -> list[str]:
    kept = (line.split("#", 1)[0].strip() for line in value.splitlines())
    return [line for line in kept if line]


def _node(module: str) -> str:
    return module.replace(".", "_")


def chart() -> str:
    """The mermaid chart: the core's layers top to bottom, the adapters and the CLI above, and
    what the one-door contract forbids them."""
    contracts = _contracts()
    layers = _lines(contracts["importlinter:contract:core-layers"]["layers"])
    door = contracts["importlinter:contract:one-door"]
    sources = _lines(door["source_modules"])
    forbidden = _lines(door["forbidden_modules"])
    out = ["```mermaid", "flowchart TB"]
    adapters = [m for m in sources if not m.startswith("jobset_core.")]
    for module in adapters:
        out.append(f'    {_node(module)}["{module}"]')
    names: list[str] = []
    for layer in layers:
        members = [name.strip() for name in layer.split(":")]
        node = "L_" + "_".join(members)
        names.append(node)
        shown = " · ".join(members)
        out.append(f'    {node}["jobset_core: {shown}"]')
    lifecycle = names[[layer.strip() for layer in layers].index("lifecycle")]
    for module in adapters:
        out.append(f"    {_node(module)} --> {lifecycle}")
    for upper, lower in itertools.pairwise(names):
        out.append(f"    {upper} --> {lower}")
    shown = ", ".join(m.removeprefix("jobset_core.") for m in forbidden)
    out.append(f'    NO["never imported by the adapters or the CLI: {shown}"]')
    out.append("    style NO stroke-dasharray: 4 4")
    out.append("```")
    return "\n".join(out)


def page_with(text: str, drawn: str) -> str:
    """``text`` with the chart between the markers replaced by ``drawn``."""
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{drawn}\n{END}{tail}"


def main(argv: list[str]) -> int:
    drawn = chart()
    if "--write" in argv:
        PAGE.write_text(page_with(PAGE.read_text(encoding="utf-8"), drawn), encoding="utf-8")
    else:
        print(drawn)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
