"""The generated reference shows every argument the code has, and no other: each public
signature's parameters are exactly the ``Args:`` its docstring documents (mkdocstrings renders
the table from both, with the defaults from the signature). Read from the source (no
imports), so it runs in any environment."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: (file, class or function) of every signature the reference pages document as arguments.
DOCUMENTED = [
    ("airflow_provider_jobset/operators.py", "JobSetOperator"),
    ("airflow_provider_jobset/sensors.py", "JobSetSensor"),
    ("airflow_provider_jobset/triggers.py", "JobSetTrigger"),
    ("airflow_provider_jobset/triggers.py", "LookAgainTrigger"),
    ("airflow_provider_jobset/hooks.py", "JobSetHook"),
    ("kfp_components/components.py", "launch_jobset"),
    ("kfp_components/components.py", "cleanup_jobsets"),
    ("jobset_core/builders/__init__.py", "pytorch_ddp"),
    ("jobset_core/builders/__init__.py", "jax_multislice"),
    ("jobset_core/builders/__init__.py", "leader_workers"),
]


def _find(tree: ast.Module, name: str) -> ast.AST:
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == name:
            return node
    raise AssertionError(f"{name} not found")


def signature(node: ast.AST) -> tuple[list[str], str]:
    """Parameter names (``**kwargs`` as such) and the docstring holding their ``Args:``."""
    doc = ast.get_docstring(node) or ""  # type: ignore[arg-type]
    func = node
    if isinstance(node, ast.ClassDef):
        func = next(n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
        doc = doc or ast.get_docstring(func) or ""
    assert isinstance(func, ast.FunctionDef)
    args = func.args
    names = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
    names = [n for n in names if n not in ("self", "cls")]
    if args.vararg:
        names.append(f"*{args.vararg.arg}")
    if args.kwarg:
        names.append(f"**{args.kwarg.arg}")
    return names, doc


def documented_args(doc: str) -> list[str]:
    lines = doc.splitlines()
    try:
        start = next(i for i, ln in enumerate(lines) if ln.strip() == "Args:")
    except StopIteration:
        return []
    found = []
    indent = None
    for line in lines[start + 1 :]:
        if not line.strip():
            continue
        width = len(line) - len(line.lstrip())
        if indent is None:
            indent = width
        if width < indent:
            break
        match = re.match(r"(\*{0,2}\w+)\s*(\([^)]*\))?:", line.strip())
        if width == indent and match:
            found.append(match[1])
    return found


@pytest.mark.parametrize(("file", "name"), DOCUMENTED, ids=[n for _, n in DOCUMENTED])
def test_docstring_documents_exactly_the_signature(file: str, name: str) -> None:
    node = _find(ast.parse((ROOT / file).read_text()), name)
    params, doc = signature(node)
    args = documented_args(doc)
    assert args, f"{name}: no Args: section"
    assert sorted(args) == sorted(params), (
        f"{name}: undocumented {sorted(set(params) - set(args))}, "
        f"documented but absent {sorted(set(args) - set(params))}"
    )
