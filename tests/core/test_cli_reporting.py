"""``jobsetctl`` as a shell tool: a closed pipe ends it quietly, every problem of a file is
reported in one run (what the models refuse and what validation finds in the rest), and its
messages name its own flags."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from jobset_core import cli
from jobset_core.client import config as client_config
from jobset_core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]

TWO_KINDS_OF_PROBLEM = """
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: Bad_Name}
spec:
  replicatedJobs:
  - name: w
    replicas: "x"
    template:
      spec:
        template:
          spec:
            restartPolicy: Never
            containers:
            - image: busybox
              env: [{name: A, value: 1}]
"""
CONTAINER = "spec.replicatedJobs[0].template.spec.template.spec.containers[0]"
EVERY_PROBLEM = [
    "metadata.name",  # the webhook's name rule
    "spec.replicatedJobs[0].replicas",  # the model's type
    f"{CONTAINER}.env[0].value",  # the Kubernetes schema
    f"{CONTAINER}.name",  # a required field of the schema
]


def _run(*argv: str, stdin: str = "") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(list(argv), stdout=out, stderr=err, stdin=io.StringIO(stdin))
    return code, out.getvalue(), err.getvalue()


def _paths(out: str, file: str) -> list[str]:
    lines = out.splitlines()
    assert all(line.startswith(f"{file}: ") for line in lines), out
    return [line[len(file) + 2 :].split(": ", 1)[0] for line in lines]


def test_a_refused_field_does_not_hide_the_other_problems(tmp_path: Path) -> None:
    path = tmp_path / "two.yaml"
    path.write_text(TWO_KINDS_OF_PROBLEM)
    code, out, err = _run("validate", str(path))
    assert (code, err) == (1, "")
    assert _paths(out, str(path)) == EVERY_PROBLEM


def test_render_reports_every_problem_too(tmp_path: Path) -> None:
    path = tmp_path / "two.yaml"
    path.write_text(TWO_KINDS_OF_PROBLEM)
    code, out, err = _run("render", str(path))
    assert (code, out) == (1, "")
    assert _paths(err, str(path)) == EVERY_PROBLEM


def test_every_document_of_a_file_is_checked_past_its_refused_fields() -> None:
    good = TWO_KINDS_OF_PROBLEM.replace("Bad_Name", "good").replace('"x"', "1")
    code, out, _ = _run("validate", "-", stdin=f"{TWO_KINDS_OF_PROBLEM}---\n{good}")
    assert code == 1
    got = _paths(out, "<stdin>")
    assert [p for p in got if p.startswith("<document 0>")] == [
        f"<document 0>.{p}" for p in EVERY_PROBLEM
    ]
    assert [p for p in got if p.startswith("<document 1>")] == [
        f"<document 1>.{CONTAINER}.env[0].value",
        f"<document 1>.{CONTAINER}.name",
    ]


def test_a_refused_field_is_reported_once() -> None:
    # An unknown field: refused by the model, and left out of the rebuilt document's check.
    text = TWO_KINDS_OF_PROBLEM.replace('replicas: "x"', "replicas: 1\n    colour: red")
    code, out, _ = _run("validate", "-", stdin=text)
    assert code == 1
    got = _paths(out, "<stdin>")
    assert got.count("spec.replicatedJobs[0].colour") == 1
    assert f"{CONTAINER}.name" in got and "metadata.name" in got


def test_a_file_that_is_not_yaml_is_one_problem() -> None:
    code, out, _ = _run("validate", "-", stdin="a: [b\n")
    assert code == 1 and len(out.splitlines()) == 1


def test_a_closed_pipe_ends_render_without_a_traceback(tmp_path: Path) -> None:
    # Enough Jobs that the output outgrows the pipe's buffer: the write itself meets the
    # closed pipe, not only the last flush.
    path = tmp_path / "big.yaml"
    path.write_text(
        TWO_KINDS_OF_PROBLEM.replace("Bad_Name", "big")
        .replace('"x"', "2000")
        .replace("- image: busybox", "- name: c\n              image: busybox")
        .replace("value: 1", "value: '1'")
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "jobset_core.cli", "render", str(path), "--max-jobs", "5000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # what `| head -1` does
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=120)
    assert first.startswith(b"apiVersion: ")
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert err == ""
    assert code == cli.EXIT_BROKEN_PIPE == 141


def test_no_kubeconfig_names_the_cli_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    code, out, err = _run("status", "some-jobset")
    assert code == cli.EXIT_RUN_INVALID and out == ""
    assert "--kubeconfig" in err, err
    assert "kubeconfig_path" not in err and "in_cluster" not in err, err


def test_the_spelling_is_the_callers_and_is_restored() -> None:
    environ: dict[str, str] = {}
    with pytest.raises(ConfigError, match=r"pass kubeconfig_path, kubeconfig or in_cluster=True"):
        client_config.choose_source(client_config.ClientSettings(), environ, False)
    with (
        client_config.settings_spelled_as(cli.CLI_SETTINGS),
        pytest.raises(ConfigError, match=r"pass --kubeconfig or set \$KUBECONFIG"),
    ):
        client_config.choose_source(client_config.ClientSettings(), environ, False)
    with pytest.raises(ConfigError, match=r"in_cluster=True"):
        client_config.choose_source(client_config.ClientSettings(), environ, False)
