"""The Troubleshooting page has an entry for every error class the code defines and every
outcome reason it can report, and none for a class or reason that does not exist.

Read from the source (no imports), so it runs in any environment.
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
                if isinstance(node, ast.ClassDef):
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


def anchors() -> set[str]:
    return set(re.findall(r"\{ #([\w-]+) \}", PAGE.read_text()))


def test_every_error_class_has_an_entry() -> None:
    gen = docs_gen()
    wanted = {gen.error_anchor(module, name) for module, name in error_classes()}
    documented = {a for a in anchors() if not a.startswith("reason-")}
    assert not wanted - documented, f"no Troubleshooting entry for {sorted(wanted - documented)}"
    assert not documented - wanted, f"entries for no such class: {sorted(documented - wanted)}"


def test_every_outcome_reason_has_an_entry() -> None:
    wanted = {f"reason-{r}" for r in outcome_reasons()} | {"reason-CreationFailed"}
    documented = {a for a in anchors() if a.startswith("reason-")}
    assert not wanted - documented, f"no entry for reasons {sorted(wanted - documented)}"
    assert not documented - wanted, f"entries for no such reason: {sorted(documented - wanted)}"


def test_creation_failure_reasons_are_the_ones_the_code_watches() -> None:
    source = (ROOT / "jobset_core/backends/_common.py").read_text()
    block = source[source.index("CREATION_FAILURE_REASONS = frozenset(") :].split(")", 1)[0]
    watched = set(re.findall(r'"(\w+)"', block))
    heading = next(ln for ln in PAGE.read_text().splitlines() if "{ #reason-CreationFailed }" in ln)
    assert watched == set(re.findall(r"`(\w+)`", heading))
