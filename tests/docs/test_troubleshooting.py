"""The Troubleshooting page has an entry for every error class the code defines, every kind
of verdict a wait can end with and every reason an outcome or a verdict can carry, and none for
a class, kind or reason that does not exist.

Private classes (``_Name``) are left out: they are control flow inside one module, caught
there, and never reach a user. Read from the source (no imports), so it runs in any
environment.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.docs._docs_gen import docs_gen

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "troubleshooting.md"
PACKAGES = ("jobset_core", "airflow_provider_jobset", "kfp_components")
_BASES = {"Exception", "BaseException", "ValueError", "Warning", "UserWarning"}


def error_classes() -> set[tuple[str, str]]:
    """(module, class) of every exception or warning class defined in the packages."""
    classes: dict[tuple[str, str], list[str]] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                    bases = [ast.unparse(b).split(".")[-1] for b in node.bases]
                    classes[(module, node.name)] = bases
    names = {name for _, name in classes}
    errors: set[tuple[str, str]] = set()
    known = set(_BASES) | {"AirflowException", "AirflowFailException"}
    changed = True
    while changed:
        changed = False
        for key, bases in classes.items():
            if key not in errors and any(b in known for b in bases):
                errors.add(key)
                known.add(key[1])
                changed = True
    assert names  # the scan found the packages
    return errors


def outcome_reasons() -> set[str]:
    """Every reason the policies can put on a JobSet (upstream's words)."""
    source = (ROOT / "jobset_core/policy/conditions.py").read_text()
    reasons = set(re.findall(r'Reason\(\s*"(\w+)"', source))
    reasons |= set(re.findall(r'^RESTARTING_DEFAULT_FAILURE_POLICY = "(\w+)"', source, re.M))
    reasons.add("FailurePolicy")  # FailurePolicy_<rule>
    outcome = (ROOT / "jobset_core/outcome.py").read_text()  # the provider's own reasons
    reasons |= set(re.findall(r'^PODS_CANNOT_START = "(\w+)"', outcome, re.M))
    return reasons


def verdict_kinds() -> set[str]:
    """The kinds of :data:`jobset_core.lifecycle.VerdictKind`."""
    tree = ast.parse((ROOT / "jobset_core/lifecycle/verdict.py").read_text())
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "VerdictKind" for t in node.targets)
            and isinstance(node.value, ast.Subscript)
        ):
            return {c.value for c in ast.walk(node.value.slice) if isinstance(c, ast.Constant)}
    raise AssertionError("VerdictKind not found")


def verdict_reasons() -> set[str]:
    """The reasons the judge writes itself (``Deleted``, ``Timeout``...): the constant reason
    of a ``self.verdict(kind, outcome, reason, message)`` call, and the ``Literal`` values a
    ``reason`` parameter takes. The other verdicts carry the outcome's or the event's reason."""
    tree = ast.parse((ROOT / "jobset_core/lifecycle/_judge.py").read_text())
    reasons: set[str] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "verdict"
            and len(node.args) >= 3
            and isinstance(node.args[2], ast.Constant)
        ):
            reasons.add(node.args[2].value)
        if (
            isinstance(node, ast.arg)
            and node.arg == "reason"
            and isinstance(node.annotation, ast.Subscript)
            and ast.unparse(node.annotation.value).endswith("Literal")
        ):
            reasons |= {
                c.value for c in ast.walk(node.annotation.slice) if isinstance(c, ast.Constant)
            }
    assert reasons  # the scan found the judge's own reasons
    return reasons


def anchors() -> set[str]:
    return set(re.findall(r"\{ #([\w-]+) \}", PAGE.read_text()))


def test_every_error_class_has_an_entry() -> None:
    gen = docs_gen()
    wanted = {gen.error_anchor(module, name) for module, name in error_classes()}
    documented = {a for a in anchors() if not a.startswith(("reason-", "verdict-"))}
    assert not wanted - documented, f"no Troubleshooting entry for {sorted(wanted - documented)}"
    assert not documented - wanted, f"entries for no such class: {sorted(documented - wanted)}"


def test_every_verdict_kind_has_an_entry() -> None:
    wanted = {f"verdict-{kind}" for kind in verdict_kinds()}
    documented = {a for a in anchors() if a.startswith("verdict-")}
    assert not wanted - documented, f"no entry for verdicts {sorted(wanted - documented)}"
    assert not documented - wanted, f"entries for no such verdict: {sorted(documented - wanted)}"


def test_every_outcome_and_verdict_reason_has_an_entry() -> None:
    reasons = outcome_reasons() | verdict_reasons()
    wanted = {f"reason-{r}" for r in reasons} | {"reason-CreationFailed"}
    documented = {a for a in anchors() if a.startswith("reason-")}
    assert not wanted - documented, f"no entry for reasons {sorted(wanted - documented)}"
    assert not documented - wanted, f"entries for no such reason: {sorted(documented - wanted)}"


def test_creation_failure_reasons_are_the_ones_the_code_watches() -> None:
    source = (ROOT / "jobset_core/policy/outcome.py").read_text()
    block = source[source.index("CREATION_FAILURE_REASONS = frozenset(") :].split(")", 1)[0]
    watched = set(re.findall(r'"(\w+)"', block))
    heading = next(ln for ln in PAGE.read_text().splitlines() if "{ #reason-CreationFailed }" in ln)
    assert watched == set(re.findall(r"`(\w+)`", heading))
