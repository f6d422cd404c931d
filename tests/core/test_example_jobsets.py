"""Every JobSet file of ``examples/jobsets/`` passes ``jobsetctl validate`` as it is, and the
cloud examples keep what puts their pods on the accelerator nodes."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml

from jobset_core import cli

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples" / "jobsets").glob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_every_example_file_validates(path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["validate", str(path)], stdout=out, stderr=err) == 0, out.getvalue()


def test_the_eks_gpu_example_puts_every_pod_on_a_gpu_node() -> None:
    document = yaml.safe_load((EXAMPLES[0].parent / "eks-gpu.yaml").read_text())
    for rjob in document["spec"]["replicatedJobs"]:
        pod = rjob["template"]["spec"]["template"]["spec"]
        assert {"eks.amazonaws.com/nodegroup", "node.kubernetes.io/instance-type"} <= set(
            pod["nodeSelector"]
        )
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod[
            "tolerations"
        ]
        assert all("nvidia.com/gpu" in c["resources"]["limits"] for c in pod["containers"])
