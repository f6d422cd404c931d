"""The Troubleshooting page has an entry for every error class the code defines, every kind
of verdict a wait can end with and every reason an outcome, a verdict or a one-time notice can
carry (a queue's refusals among them), and none for a class, kind or reason that does not
exist.

Private classes (``_Name``) are left out: they are control flow inside one module, caught
there, and never reach a user. Read from the source (no imports), so it runs in any
environment.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.docs._docs_gen import docs_gen

GEN = docs_gen()
#: ``ast.parse`` safe beside other threads' parses (see ``docs_gen.parse``).
parse = GEN.parse

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
            for node in parse(path.read_text()).body:
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
    tree = parse((ROOT / "jobset_core/lifecycle/verdict.py").read_text())
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "VerdictKind" for t in node.targets)
            and isinstance(node.value, ast.Subscript)
        ):
            return {c.value for c in ast.walk(node.value.slice) if isinstance(c, ast.Constant)}
    raise AssertionError("VerdictKind not found")


JUDGE = ROOT / "jobset_core/lifecycle/_judge.py"
QUEUE = ROOT / "jobset_core/policy/queue.py"
#: Kueue's own reasons (v0.17, ``apis/kueue/v1beta2/workload_types.go``) that a ``refused``
#: verdict carries as Kueue wrote them: ``Inadmissible`` (a LocalQueue or ClusterQueue that
#: does not exist), and a ``DeactivationTarget`` condition's reason, read before Kueue
#: evicts the deactivated Workload. Its ``Evicted`` reasons (``Deactivated``,
#: ``DeactivatedDueTo<cause>``) share the entry of the reason the code writes itself.
KUEUE_REFUSALS = {"Inadmissible", "RequeuingLimitExceeded", "MaximumExecutionTimeExceeded"}


def _string_constants(path: Path) -> dict[str, str]:
    """The module-level ``NAME = "text"`` constants of a module."""
    out: dict[str, str] = {}
    for node in parse(path.read_text()).body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            out.update({t.id: node.value.value for t in node.targets if isinstance(t, ast.Name)})
    return out


def _known_constants(path: Path) -> dict[str, str]:
    """The string constants a module may name: those it imports from the packages (``from
    jobset_core.policy.queue import ADMISSION_TIMEOUT``), and its own."""
    known: dict[str, str] = {}
    for node in parse(path.read_text()).body:
        if not (isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGES)):
            continue
        module = ROOT.joinpath(*(node.module or "").split("."))
        source = module.with_suffix(".py")
        if not source.exists():
            source = module / "__init__.py"
        values = _string_constants(source) if source.exists() else {}
        known.update({a.asname or a.name: values[a.name] for a in node.names if a.name in values})
    return known | _string_constants(path)


def _text(node: ast.expr, known: dict[str, str]) -> str | None:
    """A reason written as a constant, or as a constant's name."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return known.get(node.id)
    return None


def verdict_reasons() -> set[str]:
    """The reasons the judge writes itself (``Deleted``, ``Timeout``, ``AdmissionTimeout``...):
    the constant reason (or a constant's name) of a ``self.verdict(kind, outcome, reason,
    message)`` call, and the ``Literal`` values a ``reason`` parameter takes. The other
    verdicts carry the outcome's, the event's or the queue's reason."""
    tree = parse(JUDGE.read_text())
    known = _known_constants(JUDGE)
    reasons: set[str] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "verdict"
            and len(node.args) >= 3
            and _text(node.args[2], known) is not None
        ):
            reasons.add(_text(node.args[2], known) or "")
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


def notice_reasons() -> set[str]:
    """The reasons of the judge's own progress notices (``WorkloadUnreadable``): the constant
    ``reason`` of a ``Progress(...)`` call in the judge."""
    tree = parse(JUDGE.read_text())
    known = _known_constants(JUDGE)
    reasons: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] == "Progress":
            for keyword in node.keywords:
                if keyword.arg == "reason" and _text(keyword.value, known) is not None:
                    reasons.add(_text(keyword.value, known) or "")
    return reasons


def queue_refusals() -> set[str]:
    """The reasons a ``refused`` verdict takes from its queue: those the queue reading writes
    itself (the constant ``reason`` of a ``Queue(status="refused", ...)``, also as the
    fallback of ``reason or "..."``), and Kueue's own (:data:`KUEUE_REFUSALS`)."""
    tree = parse(QUEUE.read_text())
    known = _known_constants(QUEUE)
    reasons: set[str] = set(KUEUE_REFUSALS)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and ast.unparse(node.func) == "Queue"):
            continue
        words = {k.arg: k.value for k in node.keywords}
        status = words.get("status")
        if status is None or _text(status, known) != "refused" or "reason" not in words:
            continue
        reason = words["reason"]
        for part in reason.values if isinstance(reason, ast.BoolOp) else [reason]:
            if _text(part, known) is not None:
                reasons.add(_text(part, known) or "")
    assert reasons - KUEUE_REFUSALS  # the scan found the queue's own reasons
    return reasons


def anchors() -> set[str]:
    return set(re.findall(r"\{ #([\w-]+) \}", PAGE.read_text()))


def test_every_error_class_has_an_entry() -> None:
    wanted = {GEN.error_anchor(module, name) for module, name in error_classes()}
    documented = {a for a in anchors() if not a.startswith(("reason-", "verdict-"))}
    assert not wanted - documented, f"no Troubleshooting entry for {sorted(wanted - documented)}"
    assert not documented - wanted, f"entries for no such class: {sorted(documented - wanted)}"


def test_every_verdict_kind_has_an_entry() -> None:
    wanted = {f"verdict-{kind}" for kind in verdict_kinds()}
    documented = {a for a in anchors() if a.startswith("verdict-")}
    assert not wanted - documented, f"no entry for verdicts {sorted(wanted - documented)}"
    assert not documented - wanted, f"entries for no such verdict: {sorted(documented - wanted)}"


def test_every_outcome_and_verdict_reason_has_an_entry() -> None:
    reasons = outcome_reasons() | verdict_reasons() | notice_reasons() | queue_refusals()
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
