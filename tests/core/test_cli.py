"""``jobsetctl``: the real console entry (``main``) and the installed script."""

from __future__ import annotations

import argparse
import io
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobset_core import cli, labels
from jobset_core.builders import jax_multislice, pytorch_ddp
from jobset_core.models import FailurePolicy, FailurePolicyRule, JobSet, dump_yaml
from jobset_core.render import PLACEMENTS, render

#: One problem line: ``FILE: field.path: message``.
LINE = re.compile(r"^(?P<file>[^:]+): (?P<path>(?:<document \d+>)?[^ :]+): (?P<message>.+)$")


def paths(out: str) -> list[str]:
    """The field paths of problem lines (every line must be one)."""
    matches = [LINE.match(line) for line in out.splitlines()]
    assert all(matches), out
    return [m["path"] for m in matches if m]


def run(*argv: str, stdin: str = "") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(list(argv), stdout=out, stderr=err, stdin=io.StringIO(stdin))
    return code, out.getvalue(), err.getvalue()


def write(tmp_path: Path, name: str, *documents: JobSet | dict[str, Any]) -> str:
    path = tmp_path / name
    path.write_text(dump_yaml(documents))
    return str(path)


def good() -> JobSet:
    return pytorch_ddp("ddp", "torch", ["train.py"], nodes=2, procs_per_node=1)


def bad_document() -> dict[str, Any]:
    """Load errors of three kinds at once: unknown field, enum, type."""
    data = good().to_dict()
    data["spec"]["successPolicy"]["operator"] = "Most"
    data["spec"]["replicatedJobs"][0]["replica"] = 2
    data["spec"]["suspend"] = "no"
    return data


def invalid_jobset() -> JobSet:
    """Loads fine; the upstream webhook would reject it (coordinator pod out of range)."""
    js = good()
    assert js.spec.coordinator is not None
    js.spec.coordinator.pod_index = 5
    return js


# --------------------------------------------------------------------------------------------
# validate


def test_validate_valid_files(tmp_path: Path) -> None:
    first = write(tmp_path, "a.yaml", good())
    jax = jax_multislice("j", "i", ["r"], slices=2, hosts_per_slice=2, topology_key="k")
    second = write(tmp_path, "b.yml", good(), jax)
    assert run("validate", first, second) == (0, "", "")


def test_validate_reports_every_load_problem_of_every_file(tmp_path: Path) -> None:
    bad = write(tmp_path, "bad.yaml", bad_document())
    fine = write(tmp_path, "fine.yaml", good())
    missing = str(tmp_path / "missing.yaml")
    code, out, err = run("validate", bad, fine, missing)
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert paths("\n".join(lines[:3])) == [
        "spec.replicatedJobs[0].replica",
        "spec.successPolicy.operator",
        "spec.suspend",
    ]
    assert all(line.startswith(f"{bad}: ") for line in lines[:3])
    assert "unknown field" in lines[0]
    assert "'All' or 'Any'" in lines[1]
    assert lines[3].startswith(f"{missing}: cannot read {missing}")
    assert len(lines) == 4


def test_validate_reports_validation_problems(tmp_path: Path) -> None:
    path = write(tmp_path, "js.yaml", invalid_jobset())
    code, out, _ = run("validate", path)
    assert code == 1
    (line,) = out.splitlines()
    match = LINE.match(line)
    assert match is not None
    assert (match["file"], match["path"]) == (path, "spec.coordinator.podIndex")


def test_validate_names_the_document_of_a_multi_document_file(tmp_path: Path) -> None:
    path = write(tmp_path, "two.yaml", good(), invalid_jobset())
    code, out, _ = run("validate", path)
    assert code == 1
    assert paths(out) == ["<document 1>.spec.coordinator.podIndex"]


def test_validate_any_file_name_and_stdin(tmp_path: Path) -> None:
    path = tmp_path / "jobset.txt"
    path.write_text(dump_yaml(good()))
    assert run("validate", str(path))[0] == 0
    assert run("validate", "-", stdin=dump_yaml(good()))[0] == 0
    code, out, _ = run("validate", "-", stdin=dump_yaml(invalid_jobset()))
    assert (code, out.split(": ")[0]) == (1, "<stdin>")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("", "no JobSet found", id="empty"),
        pytest.param("apiVersion: v1\nkind: ConfigMap\n", "expected kind JobSet", id="other-kind"),
        pytest.param("a: [b\n", "not valid YAML", id="not-yaml"),
    ],
)
def test_validate_files_without_a_jobset(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "x.yaml"
    path.write_text(text)
    code, out, _ = run("validate", str(path))
    assert code == 1
    assert out.startswith(f"{path}: ")
    assert message in out


def test_validate_feature_gates(tmp_path: Path) -> None:
    js = good()
    js.spec.failure_policy = FailurePolicy(
        rules=[FailurePolicyRule(name="again", action="RestartJob")]
    )
    path = write(tmp_path, "gated.yaml", js)
    code, out, _ = run("validate", path)
    assert code == 1
    assert "RestartJob" in out
    assert run("validate", "--feature-gates", "RestartJob=true", path)[0] == 0
    code, _, err = run("validate", "--feature-gates", "Teleport=true", path)
    assert code == cli.EXIT_USAGE
    assert "unknown feature gate" in err


def test_validate_allow_unknown_fields(tmp_path: Path) -> None:
    data = good().to_dict()
    data["spec"]["fromTheFuture"] = True
    path = write(tmp_path, "new.yaml", data)
    assert run("validate", path)[0] == 1
    assert run("validate", "--allow-unknown-fields", path) == (0, "", "")


@pytest.mark.parametrize(
    "place",
    [("spec", "fromTheFuture"), ("spec", "replicatedJobs", 0, "template", "spec", "newKnob")],
    ids=["jobset-model", "job-schema"],
)
def test_an_unknown_field_names_the_flag_that_carries_it(
    tmp_path: Path, place: tuple[Any, ...]
) -> None:
    """Each way says what it can do with a field newer than the models: validate names its
    flag (not the Python argument); run, which cannot carry one, names the file and says so,
    before it reads the kubeconfig (whose cluster is never asked)."""
    data = good().to_dict()
    node = data
    for key in place[:-1]:
        node = node[key]
    node[place[-1]] = True
    path = write(tmp_path, "new.yaml", data)
    code, out, _ = run("validate", path)
    assert code == 1 and "pass --allow-unknown-fields to carry it" in out, out
    assert "allow_unknown_fields=True" not in out
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    code, out, err = run("run", "--kubeconfig", str(kubeconfig), path)
    assert code == 2 and out == "", (out, err)
    assert err.startswith(f"{path}: spec."), err
    assert "remove it to run the JobSet" in err and "allow_unknown_fields" not in err, err


# --------------------------------------------------------------------------------------------
# render


def test_render_prints_service_then_jobs(tmp_path: Path) -> None:
    js = pytorch_ddp("ddp", "torch", ["t.py"], nodes=4, jobs=2, procs_per_node=1)
    path = write(tmp_path, "js.yaml", js)
    code, out, err = run("render", path, "-n", "ml", "--attempt", "3")
    assert (code, err) == (0, "")
    documents = list(yaml.safe_load_all(out))
    assert documents == list(render(js, "ml", 3).objects())
    assert [(d["kind"], d["metadata"]["name"]) for d in documents] == [
        ("Service", "ddp"),
        ("Job", "ddp-node-0"),
        ("Job", "ddp-node-1"),
    ]
    assert {d["metadata"]["namespace"] for d in documents} == {"ml"}
    assert documents[1]["metadata"]["labels"][labels.RESTART_ATTEMPT] == "3"


@pytest.mark.parametrize(
    ("written", "flag", "expected"),
    [
        pytest.param(None, None, "default", id="default"),
        pytest.param("team", None, "team", id="from-metadata"),
        pytest.param(None, "other", "other", id="from-flag"),
        pytest.param("team", "team", "team", id="both-agree"),
    ],
)
def test_render_namespace(
    tmp_path: Path, written: str | None, flag: str | None, expected: str
) -> None:
    js = good()
    js.metadata.namespace = written
    path = write(tmp_path, "js.yaml", js)
    code, out, _ = run("render", path, *(["--namespace", flag] if flag else []))
    assert code == 0
    assert {d["metadata"]["namespace"] for d in yaml.safe_load_all(out)} == {expected}


def test_render_refuses_a_namespace_mismatch(tmp_path: Path) -> None:
    js = good()
    js.metadata.namespace = "team"
    code, out, err = run("render", write(tmp_path, "js.yaml", js), "-n", "other")
    assert (code, out) == (1, "")
    assert "metadata.namespace" in err


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["render", "js.yaml", "-n", "BAD NS!"], id="render"),
        pytest.param(["validate", "js.yaml", "-n", "BAD NS!"], id="validate"),
        pytest.param(["run", "js.yaml", "-n", "BAD NS!"], id="run"),
        pytest.param(["status", "js", "--namespace", "BAD NS!"], id="status"),
        pytest.param(["delete", "js", "-n", "a" * 64], id="delete-too-long"),
        pytest.param(["logs", "js", "-n", "Team"], id="logs-upper-case"),
    ],
)
def test_a_bad_namespace_flag_is_a_usage_error_before_anything_is_read(argv: list[str]) -> None:
    code, out, err = run(*argv)
    assert (code, out) == (cli.EXIT_USAGE, "")
    assert "argument -n/--namespace: '" in err
    assert "is not a valid namespace name" in err


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["status", "Bad_Name"], id="status"),
        pytest.param(["delete", "1js"], id="delete"),
        pytest.param(["logs", "js.x"], id="logs"),
        pytest.param(["logs", "js", "--job-index", "-1"], id="negative-job-index"),
        pytest.param(["logs", "js", "--pod-index", "x"], id="pod-index-not-a-number"),
    ],
)
def test_bad_names_and_indexes_of_cluster_commands_are_usage_errors(argv: list[str]) -> None:
    code, out, err = run(*argv)
    assert (code, out) == (cli.EXIT_USAGE, "")
    assert err.startswith("usage: jobsetctl")


def test_validate_checks_the_namespace_it_is_given(tmp_path: Path) -> None:
    js = good()
    js.metadata.namespace = "team"
    path = write(tmp_path, "js.yaml", js)
    assert run("validate", path, "-n", "team") == (0, "", "")
    code, out, _ = run("validate", path, "-n", "other")
    assert code == cli.EXIT_INVALID
    assert out.startswith(f"{path}: metadata.namespace: the JobSet's namespace 'team' is not")


def test_render_refuses_invalid_input(tmp_path: Path) -> None:
    path = write(tmp_path, "js.yaml", invalid_jobset())
    code, out, err = run("render", path)
    assert (code, out) == (1, "")
    assert err.startswith(f"{path}: spec.coordinator.podIndex: ")
    two = write(tmp_path, "two.yaml", good(), good())
    code, out, err = run("render", two)
    assert (code, out) == (1, "")
    assert "expected exactly one JobSet, found 2" in err


def test_render_placement(tmp_path: Path) -> None:
    assert set(cli.local._PLACEMENTS) == set(PLACEMENTS)
    js = jax_multislice("jx", "jax", ["r"], slices=2, hosts_per_slice=1, topology_key="pool")
    path = write(tmp_path, "jx.yaml", js)
    _, webhook, _ = run("render", path)
    _, affinity, _ = run("render", path, "--placement", "affinity")
    pod = list(yaml.safe_load_all(affinity))[1]["spec"]["template"]["spec"]
    assert "affinity" in pod
    assert "affinity" not in list(yaml.safe_load_all(webhook))[1]["spec"]["template"]["spec"]


# --------------------------------------------------------------------------------------------
# Usage and structure


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param([], id="no-command"),
        pytest.param(["frobnicate"], id="unknown-command"),
        pytest.param(["validate"], id="no-file"),
        pytest.param(["render", "x.yaml", "--attempt", "-1"], id="negative-attempt"),
        pytest.param(["render", "x.yaml", "--attempt", "two"], id="attempt-not-a-number"),
        pytest.param(["validate", "--feature-gates", "RestartJob", "x.yaml"], id="gate-syntax"),
        pytest.param(["render", "a.yaml", "b.yaml"], id="render-one-file"),
    ],
)
def test_usage_errors(argv: list[str]) -> None:
    code, out, err = run(*argv)
    assert (code, out) == (cli.EXIT_USAGE, "")
    assert err.startswith("usage: jobsetctl")


def test_help_and_version() -> None:
    code, out, _ = run("--help")
    assert code == 0
    assert all(command.name in out for command in cli.COMMANDS)
    code, out, _ = run("--version")
    assert code == 0
    assert out.startswith("jobsetctl ")


def test_a_new_subcommand_is_one_more_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    def configure(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("name")

    def hello(args: argparse.Namespace, streams: cli.Streams) -> int:
        streams.out.write(f"hello {args.name}\n")
        return 7

    extra = cli.Command("hello", "say hello", configure, hello)
    monkeypatch.setattr(cli, "COMMANDS", (*cli.COMMANDS, extra))
    assert run("hello", "world") == (7, "hello world\n", "")


# --------------------------------------------------------------------------------------------
# The installed console script


def test_installed_console_script(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "jobsetctl"
    assert script.exists(), "the project is not installed into this environment"
    bad = write(tmp_path, "bad.yaml", bad_document())
    proc = subprocess.run(
        [str(script), "validate", bad], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 1
    assert len(proc.stdout.splitlines()) == 3
    assert len(paths(proc.stdout)) == 3
    fine = write(tmp_path, "fine.yaml", good())
    proc = subprocess.run(
        [str(script), "render", fine, "-n", "ml"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (proc.returncode, proc.stderr) == (0, "")
    assert [d["kind"] for d in yaml.safe_load_all(proc.stdout)] == ["Service", "Job"]


@pytest.mark.parametrize("collecting", [True, False], ids=["collector on", "collector off"])
def test_a_cluster_command_collects_garbage_while_it_runs_and_leaves_the_collector_as_found(
    collecting: bool,
) -> None:
    # The console script starts with the collector off; a cluster command may wait for hours,
    # so it runs with it on, whatever it found, and restores what it found.
    import gc

    from jobset_core.cli.cluster import _guard

    seen: list[bool] = []

    async def work(args: argparse.Namespace, streams: cli.Streams) -> int:
        seen.append(gc.isenabled())
        return 7

    streams = cli.Streams(io.StringIO(), io.StringIO(), io.StringIO())
    before = gc.isenabled()
    (gc.enable if collecting else gc.disable)()
    try:
        code = _guard("status", work)(argparse.Namespace(), streams)
        after = gc.isenabled()
    finally:
        (gc.enable if before else gc.disable)()
    assert (code, seen, after) == (7, [True], collecting)
