"""Differential fuzzing: our verdict on a JobSet file against the real API server's.

Each example is a valid JobSet (an upstream example or a builder's output) with one to three
structure-aware mutations (:mod:`tests.core.fuzz`): any node replaced by null, strings, numbers
at the int32/int64 edges, lists or maps, deleted, duplicated or given an unknown key, and the
hostile kinds of issue 12 placed where they matter (null list items, environment variable names
and ``fieldRef`` paths, quantities, label and annotation keys and sizes, names around 63
characters, deep nesting, namespaces). The file is written, loaded, validated and rendered as a
user's would be, and the devcluster answers a server-side dry-run create of the JobSet
(``fieldValidation=Strict``) and of the Service and Jobs the controller would make of what it
stored. The test asserts that we never accept what the server rejects at either step, never
reject what it accepts except for the deliberate strictness of
:data:`jobset_core.validation.strictness.STRICTNESS`, and that every problem names its field
path (or is a whole-file problem) in a message of bounded length.

Profiles (``JOBSET_FUZZ_PROFILE``):

* ``fast`` (default, ``make test``): 300 examples from a fixed seed (``derandomize``), no
  example database: every run tries the same examples.
* ``long`` (``make fuzz``): ``JOBSET_FUZZ_EXAMPLES`` examples (default 5000) from a random seed,
  failures kept in ``.hypothesis/`` and replayed first next time.

Every disagreement found so far is replayed as an ``@example`` (:data:`REGRESSIONS`).
"""

from __future__ import annotations

import collections
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from tests.core.fuzz import (
    Mutant,
    Mutation,
    disagreements,
    mutants,
    our_verdict,
    server_verdict,
)

pytestmark = pytest.mark.cluster

_RJ0 = ("spec", "replicatedJobs", 0)
_POD0 = (*_RJ0, "template", "spec", "template", "spec")
_CTR0 = (*_POD0, "containers", 0)
_LW = "builder/leader-workers"
_DDP = "builder/pytorch-ddp"

#: The disagreements the fuzzing found, each as the smallest mutant that showed it; all are
#: fixed (validation mirrors the server now) or listed as deliberate strictness.
REGRESSIONS: tuple[Mutant, ...] = (
    # ports: [null] is a zero-valued port: containerPort 0 is "Required value" for the Job.
    Mutant(_LW, (Mutation("set", (*_CTR0, "ports"), [None]),)),
    # Annotations over 256 KiB in total.
    Mutant(_LW, (Mutation("set", ("metadata", "annotations"), {"a": "x" * 262_144}),)),
    # ... also of a Job template, counting what the controller adds.
    Mutant(
        _LW,
        (Mutation("set", (*_RJ0, "template", "metadata"), {"annotations": {"a": "x" * 262_000}}),),
    ),
    # Environment variable names are printable ASCII but '='.
    Mutant(_LW, (Mutation("set", (*_CTR0, "env"), [{"name": "A=B", "value": "1"}]),)),
    Mutant(_LW, (Mutation("set", (*_CTR0, "env"), [{"name": "é", "value": "1"}]),)),
    # fieldRef paths: unknown, empty, subscripted where not allowed.
    Mutant(
        _LW,
        (
            Mutation(
                "set",
                (*_CTR0, "env"),
                [{"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "spec.foo"}}}],
            ),
        ),
    ),
    Mutant(
        _LW,
        (
            Mutation(
                "set",
                (*_CTR0, "env"),
                [{"name": "X", "valueFrom": {"fieldRef": {"fieldPath": ""}}}],
            ),
        ),
    ),
    Mutant(
        _LW,
        (
            Mutation(
                "set",
                (*_CTR0, "env"),
                [{"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "status.phase"}}}],
            ),
        ),
    ),
    # A divisor is compared by the spelling Go keeps: "+1" is not "1".
    Mutant(
        "builder/jax-multislice",
        (
            Mutation(
                "set",
                (*_CTR0, "env"),
                [
                    {
                        "name": "MY_VAR",
                        "valueFrom": {
                            "resourceFieldRef": {"resource": "limits.cpu", "divisor": "+1"}
                        },
                    }
                ],
            ),
        ),
    ),
    # A negative emptyDir.sizeLimit; a quantity Go reads as zero ("Ki") is fine.
    Mutant(
        _LW,
        (Mutation("set", (*_POD0, "volumes"), [{"name": "s", "emptyDir": {"sizeLimit": "-1Gi"}}]),),
    ),
    Mutant(_LW, (Mutation("set", (*_CTR0, "resources"), {"limits": {"nvidia.com/gpu": "Ki"}}),)),
    # int32 overflow in the Job template, and an int64 field.
    Mutant(_LW, (Mutation("set", (*_RJ0, "template", "spec", "backoffLimit"), 2**31),)),
    Mutant(_LW, (Mutation("set", (*_RJ0, "template", "spec", "completions"), 10**30),)),
    Mutant(_LW, (Mutation("set", (*_RJ0, "template", "spec", "activeDeadlineSeconds"), 2**63),)),
    # A null value of an unknown field is an unknown field; a null label is the empty label.
    Mutant(_LW, (Mutation("set", (*_POD0, "fooBar"), None),)),
    Mutant(_LW, (Mutation("set", ("metadata", ""), None),)),
    Mutant(_LW, (Mutation("set", ("metadata", "labels"), {"Bad Key!": None}),)),
    # A null exit code is 0: "must not be 0 for the In operator".
    Mutant(
        "upstream/v0.8.2/failure-policy/onjobfailurereasons-present-podfailurepolicy.yaml",
        (
            Mutation(
                "append",
                (
                    *_RJ0,
                    "template",
                    "spec",
                    "podFailurePolicy",
                    "rules",
                    0,
                    "onExitCodes",
                    "values",
                ),
                None,
            ),
        ),
    ),
    # An exec probe needs a command.
    Mutant(
        "upstream/v0.8.2/startup-policy/startup-driver-ready.yaml",
        (Mutation("delete", (*_CTR0, "readinessProbe", "exec", "command")),),
    ),
    # An extended resource too large for the server's integer check.
    Mutant(_DDP, (Mutation("set", (*_CTR0, "resources"), {"limits": {"nvidia.com/gpu": 6.5e16}}),)),
    # A replicated job name that is not a label value.
    Mutant(_LW, (Mutation("set", (*_RJ0, "name"), "a-"),)),
    # A JobSet name of 64 characters names the headless Service.
    Mutant(
        "upstream/v0.12.0/config/samples/batch_v1alpha2_jobset.yaml",
        (Mutation("set", ("metadata", "name"), "a" * 64),),
    ),
    # The CRD's CEL rule needs spec.replicatedJobs when startupPolicy is InOrder.
    Mutant(
        _LW,
        (
            Mutation("set", ("spec", "startupPolicy"), {"startupPolicyOrder": "InOrder"}),
            Mutation("delete", ("spec", "replicatedJobs")),
        ),
    ),
    # Deliberate strictness: replicas below 0, a replicated job without a name, another kind.
    Mutant(_LW, (Mutation("set", (*_RJ0, "replicas"), -1),)),
    Mutant(_LW, (Mutation("delete", (*_RJ0, "name")),)),
    Mutant(_LW, (Mutation("set", ("kind",), "Foo"),)),
    # Deep nesting in a Job template: a clear error with the path, no RecursionError.
    Mutant(_LW, (Mutation("nest", (*_POD0, "affinity"), (300, "map")),)),
)


def _profile() -> settings:
    common: dict[str, Any] = {
        "deadline": None,
        "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
        "print_blob": True,
    }
    name = os.environ.get("JOBSET_FUZZ_PROFILE", "fast")
    if name == "fast":
        return settings(max_examples=300, derandomize=True, database=None, **common)
    if name == "long":
        examples = int(os.environ.get("JOBSET_FUZZ_EXAMPLES", "5000"))
        database = DirectoryBasedExampleDatabase(Path(__file__).parents[2] / ".hypothesis")
        return settings(max_examples=examples, database=database, **common)
    raise ValueError(f"JOBSET_FUZZ_PROFILE must be fast or long, not {name!r}")


def _with_regressions(test: Callable[..., None]) -> Callable[..., None]:
    for mutant in reversed(REGRESSIONS):
        test = example(mutant=mutant)(test)
    return test


@dataclass
class _Fuzz:
    api: Any
    namespace: str
    directory: Path
    counts: collections.Counter[str]


@pytest.fixture(scope="module")
def fuzz(
    devcluster: Any, tmp_path_factory: pytest.TempPathFactory, request: Any
) -> Iterator[_Fuzz]:
    namespace = devcluster.create_namespace("fuzz")
    state = _Fuzz(
        devcluster.api_client(), namespace, tmp_path_factory.mktemp("fuzz"), collections.Counter()
    )
    try:
        yield state
    finally:
        devcluster.delete_namespace(namespace)
        if state.counts:
            shown = ", ".join(f"{key}: {value}" for key, value in sorted(state.counts.items()))
            capture = request.config.pluginmanager.getplugin("capturemanager")
            with capture.global_and_fixture_disabled():
                print(f"\n[fuzz] {sum(state.counts.values())} examples; {shown}")


@_profile()
@given(mutant=mutants())
@_with_regressions
def test_our_verdict_agrees_with_the_api_server(mutant: Mutant, fuzz: _Fuzz) -> None:
    document = mutant.document()
    ours = our_verdict(document, fuzz.directory, fuzz.namespace)
    theirs = server_verdict(fuzz.api, document, fuzz.namespace)
    fuzz.counts[f"ours {_word(ours.accepted)}, server {_word(theirs.accepted)}"] += 1
    found = disagreements(ours, theirs)
    assert not found, "\n".join(found)


def _word(accepted: bool) -> str:
    return "accepts" if accepted else "rejects"
