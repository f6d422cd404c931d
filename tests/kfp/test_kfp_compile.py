"""Compiled forms: the checked-in component YAMLs are current; the example's IR is golden."""

import re
import runpy
from pathlib import Path
from typing import Any

import pytest
import yaml
from kfp import compiler, components, dsl

import kfp_components
from kfp_components.components import IDENTITY_ARGUMENTS, LAUNCHER_IMAGE

pytestmark = pytest.mark.kfp

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "kfp_components"
EXAMPLE = ROOT / "examples" / "pipelines" / "scheduled_retraining.py"
GOLDEN = Path(__file__).resolve().parent / "golden" / "scheduled_retraining.yaml"
REGENERATE = "regenerate with: .venv/kfp/bin/python -m kfp_components._compile"


def _normalise(text: str) -> str:
    """Drop what depends on the SDK release, not on our code (as kfp's snapshot tests do)."""
    text = re.sub(r"(?m)^sdkVersion: .*\n", "", text)
    return re.sub(r"kfp==\d+(\.\d+)*", "kfp==<sdk>", text)


def _compiled(target: Any, tmp_path: Path, name: str) -> str:
    out = tmp_path / name
    compiler.Compiler().compile(target, str(out))
    return out.read_text(encoding="utf-8")


def _documents(text: str) -> list[Any]:
    return list(yaml.safe_load_all(text))


def test_exports() -> None:
    assert kfp_components.__all__ == sorted(kfp_components.__all__)
    assert kfp_components.__all__ == ["LAUNCHER_IMAGE", "cleanup_jobsets", "launch_jobset"]
    for name in kfp_components.__all__:
        assert getattr(kfp_components, name) is not None
    with pytest.raises(AttributeError):
        kfp_components.nothing  # noqa: B018


@pytest.mark.parametrize("name", ["launch_jobset", "cleanup_jobsets"])
def test_checked_in_yaml_is_current(name: str, tmp_path: Path) -> None:
    checked_in = (PACKAGE / f"{name}.yaml").read_text(encoding="utf-8")
    fresh = _compiled(getattr(kfp_components, name), tmp_path, f"{name}.yaml")
    assert _normalise(checked_in) == _normalise(fresh), f"{name}.yaml is stale; {REGENERATE}"


def test_checked_in_yaml_loads_and_runs_in_the_launcher_image() -> None:
    loaded = components.load_component_from_file(str(PACKAGE / "launch_jobset.yaml"))
    spec = _documents((PACKAGE / "launch_jobset.yaml").read_text(encoding="utf-8"))[0]
    executor = spec["deploymentSpec"]["executors"]["exec-launch-jobset"]["container"]
    assert executor["image"] == LAUNCHER_IMAGE
    assert not any("pip install" in part for part in executor["command"])
    assert loaded.name == "launch-jobset"
    passthroughs = spec["components"]["comp-launch-jobset"]["taskConfigPassthroughs"]
    fields = {item["field"]: item.get("applyToTask", False) for item in passthroughs}
    assert fields == {
        "RESOURCES": False,
        "ENV": True,
        "KUBERNETES_NODE_SELECTOR": False,
        "KUBERNETES_TOLERATIONS": False,
        "KUBERNETES_AFFINITY": False,
        "KUBERNETES_VOLUMES": False,
    }


def _launch_task(pipeline_spec: dict[str, Any]) -> dict[str, Any]:
    task: dict[str, Any] = pipeline_spec["root"]["dag"]["tasks"]["launch-jobset"]
    return task


def test_task_gets_identity_placeholders_and_no_caching(tmp_path: Path) -> None:
    @dsl.pipeline(name="p")
    def pipeline() -> None:
        kfp_components.launch_jobset(jobset="x")

    task = _launch_task(_documents(_compiled(pipeline, tmp_path, "p.yaml"))[0])
    assert task["cachingOptions"] == {}
    given = {k: v["runtimeValue"]["constant"] for k, v in task["inputs"]["parameters"].items()}
    assert {k: given[k] for k in IDENTITY_ARGUMENTS} == IDENTITY_ARGUMENTS


def test_caller_may_override_identity_and_caching(tmp_path: Path) -> None:
    @dsl.pipeline(name="p")
    def pipeline() -> None:
        task = kfp_components.launch_jobset(jobset="x", task_id="fixed")
        task.set_caching_options(True)

    task = _launch_task(_documents(_compiled(pipeline, tmp_path, "p.yaml"))[0])
    assert task["cachingOptions"] == {"enableCache": True}
    assert task["inputs"]["parameters"]["task_id"]["runtimeValue"]["constant"] == "fixed"


def test_task_settings_are_allowed_by_the_passthroughs(tmp_path: Path) -> None:
    @dsl.pipeline(name="p")
    def pipeline() -> None:
        task = kfp_components.launch_jobset(jobset="x")
        task.set_cpu_limit("4").set_memory_limit("8G").set_env_variable("A", "1")
        task.set_accelerator_type("nvidia.com/gpu").set_accelerator_limit(1)

    spec = _documents(_compiled(pipeline, tmp_path, "p.yaml"))[0]
    container = spec["deploymentSpec"]["executors"]["exec-launch-jobset"]["container"]
    assert container["resources"]["resourceCpuLimit"] == "4"
    assert container["env"] == [{"name": "A", "value": "1"}]


def test_example_pipeline_matches_golden_ir(tmp_path: Path) -> None:
    example = runpy.run_path(str(EXAMPLE), run_name="example")
    fresh = _compiled(example["scheduled_retraining"], tmp_path, "scheduled_retraining.yaml")
    golden = GOLDEN.read_text(encoding="utf-8")
    assert _normalise(fresh) == golden, f"golden IR is stale; {REGENERATE}"


def test_example_pipeline_wiring() -> None:
    spec = _documents(GOLDEN.read_text(encoding="utf-8"))[0]
    tasks = spec["components"]["comp-exit-handler-1"]["dag"]["tasks"]
    assert tasks["launch-jobset"]["inputs"]["parameters"]["jobset"]["taskOutputParameter"] == {
        "outputParameterKey": "Output",
        "producerTask": "training-jobset",
    }
    assert tasks["evaluate"]["inputs"]["parameters"]["result"]["taskOutputParameter"] == {
        "outputParameterKey": "result",
        "producerTask": "launch-jobset",
    }
    assert tasks["launch-jobset"]["retryPolicy"]["maxRetryCount"] == 2
    exit_task = spec["root"]["dag"]["tasks"]["cleanup-jobsets"]
    assert exit_task["triggerPolicy"]["strategy"] == "ALL_UPSTREAM_TASKS_COMPLETED"


def test_dockerfile_builds_the_launcher_image_from_this_repository() -> None:
    """No Docker here: check what the Dockerfile relies on (sources, tag, entry point)."""
    text = (PACKAGE / "Dockerfile").read_text(encoding="utf-8")
    sources = [
        part
        for line in text.splitlines()
        if line.startswith("COPY ")
        for part in line.split()[1:-1]
    ]
    assert sources, "no COPY lines"
    for source in sources:
        assert (ROOT / source).exists(), source
    # The tag is the package's own (one version): the build command reads LAUNCHER_IMAGE.
    assert "print(k.LAUNCHER_IMAGE)" in text and LAUNCHER_IMAGE.endswith("-python3.11")
    assert 'ENTRYPOINT ["python", "-m", "kfp_components.launcher"]' in text
    assert "python" in LAUNCHER_IMAGE.rsplit(":", 1)[1]  # kfp.local warns otherwise
