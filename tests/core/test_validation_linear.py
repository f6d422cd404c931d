"""Loading and validation cost time linear in the input (issue 21: 5,000 replicated jobs took
53 s, 10,000 documents over 20 s).

Timings are never asserted: the cost is counted as the Python function calls a load and a
validation make (deterministic for one input), for an input and for one four times larger. A
quadratic part shows as a ratio well above 4 (the old per-replicated-job sums of the controller
annotations: 4.9 at 60 replicated jobs), linear work as at most 4 (fixed costs make it less).
The timings themselves are in the ``local`` benchmark family.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from jobset_core.defaults import with_defaults
from jobset_core.models import load_jobset, load_jobsets
from jobset_core.render import exclusive_annotations, identity
from jobset_core.validation import _controller_annotations, validate
from tests.cluster import bodies

#: Calls for four times the input, over the calls for the input: linear work with fixed costs
#: stays below 4; a part quadratic in the input pushes a sum like this far above.
MAX_RATIO = 4.3


def replicated_job(index: int, **extra: Any) -> dict[str, Any]:
    container = {
        "name": "main",
        "image": "busybox",
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
        "resources": {"requests": {"cpu": "100m"}},
    }
    return {
        "name": f"w{index}",
        "groupName": f"g{index % 3}",
        "replicas": 1 + index % 4,
        "template": {
            "spec": {
                "completions": 1,
                "parallelism": 1,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [container],
                        "volumes": [{"name": f"v{index}", "emptyDir": {}}],
                    }
                },
            }
        },
        **extra,
    }


def jobset(name: str, rjobs: int) -> dict[str, Any]:
    """Every rule that looks across replicated jobs has something to read: dependsOn, success
    and failure policy targets, a coordinator, volume claim templates."""
    names = [f"w{i}" for i in range(rjobs)]
    rjob_list = [
        replicated_job(i, **({"dependsOn": [{"name": "w0", "status": "Ready"}]} if i else {}))
        for i in range(rjobs)
    ]
    claims = [{"metadata": {"name": "data"}, "spec": {"accessModes": ["RWO"]}}]
    return bodies.jobset(
        name,
        *rjob_list,
        successPolicy={"operator": "All", "targetReplicatedJobs": names},
        failurePolicy={
            "maxRestarts": 1,
            "rules": [{"name": "r", "action": "FailJobSet", "targetReplicatedJobs": names}],
        },
        coordinator={"replicatedJob": "w1"},
        volumeClaimPolicies=[{"templates": claims}],
    )


def calls(work: Callable[[], Any]) -> int:
    """The Python function calls ``work`` makes."""
    count = 0

    def profile(_frame: Any, event: str, _arg: Any) -> None:
        nonlocal count
        if event == "call":
            count += 1

    sys.setprofile(profile)
    try:
        work()
    finally:
        sys.setprofile(None)
    return count


def check(text: str) -> None:
    for loaded in load_jobsets(text):
        assert validate(loaded) == []


def ratio(make: Callable[[int], str], size: int) -> float:
    check(make(size))  # warm: the schema tables, pydantic's first validations
    return calls(lambda: check(make(4 * size))) / calls(lambda: check(make(size)))


def test_replicated_jobs_cost_linear_time() -> None:
    def make(rjobs: int) -> str:
        return yaml.safe_dump(jobset("js", rjobs), sort_keys=False)

    assert ratio(make, 60) < MAX_RATIO


def test_documents_cost_linear_time() -> None:
    def make(documents: int) -> str:
        return yaml.safe_dump_all([jobset(f"js{i}", 3) for i in range(documents)])

    assert ratio(make, 15) < MAX_RATIO


# -- the controller's annotations, read in one pass ------------------------------------------


def _shapes() -> list[dict[str, Any]]:
    rng = random.Random(21)
    shapes = []
    for _ in range(60):
        rjobs = []
        for index in range(rng.randint(1, 7)):
            rjob = replicated_job(index)
            rjob["replicas"] = rng.choice([None, 0, 1, 2, 7, 12])
            rjob["groupName"] = rng.choice([None, "a", "b", "default"])
            if rng.random() < 0.2:
                rjob["template"]["metadata"] = {
                    "annotations": {"alpha.jobset.sigs.k8s.io/exclusive-topology": "zone"}
                }
            rjobs.append({k: v for k, v in rjob.items() if v is not None})
        document = jobset("js", 0)
        document["spec"] = {"replicatedJobs": rjobs}
        if rng.random() < 0.3:
            document["spec"]["coordinator"] = {"replicatedJob": "w0", "jobIndex": 1}
        shapes.append(document)
    return shapes


@pytest.mark.parametrize("document", _shapes())
def test_controller_annotations_are_those_of_the_last_job(document: dict[str, Any]) -> None:
    """The same values as :func:`jobset_core.render.identity` on the whole JobSet (global and
    group counts and offsets), for the last Job of each replicated job."""
    defaulted = with_defaults(load_jobset(document))
    found = _controller_annotations(defaulted)
    for index, rjob in enumerate(defaulted.replicated_jobs):
        last = max((rjob.replicas if rjob.replicas is not None else 1) - 1, 0)
        expected = identity(
            defaulted,
            index,
            last,
            "default",
            uid="0" * 8 + "-0000" * 3 + "-" + "0" * 12,
            restart_attempt=0,
        )
        assert found[index] == {
            **dict(expected.values),
            **exclusive_annotations(defaulted, rjob),
        }
