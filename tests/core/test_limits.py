"""The hard limits of :mod:`jobset_core.limits`: hostile or careless input refused early, as a
whole (never truncated), with a message naming the file, the field path and the limit; and
every real JobSet (upstream examples, builder output) far below them."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobset_core import cli, limits
from jobset_core.builders import jax_multislice, leader_workers, pytorch_ddp
from jobset_core.errors import SpecError
from jobset_core.models import dump_yaml, load_jobset, load_jobsets, read_stream
from jobset_core.render import render
from tests.core.conftest import UpstreamExample

MINIMAL = """\
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: js}
spec:
  replicatedJobs:
  - name: w
    replicas: REPLICAS
    template:
      spec:
        parallelism: 1
        completions: 1
        template:
          spec:
            restartPolicy: Never
            containers: [{name: c, image: busybox}]
"""


def refusal(source: Any) -> tuple[str, str, str]:
    """(path, rule, message) of the one problem loading ``source`` gives."""
    with pytest.raises(SpecError) as raised:
        load_jobsets(source)
    (problem,) = raised.value.problems
    return problem.path, problem.rule, problem.message


def run(*argv: str, stdin: Any = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(list(argv), stdout=out, stderr=err, stdin=stdin or io.StringIO(""))
    return code, out.getvalue(), err.getvalue()


def alias_bomb(levels: int) -> str:
    lines = ["l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for level in range(1, levels):
        lines.append(f"l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * 9)}]")
    return "\n".join(lines) + "\n"


# -- file size ---------------------------------------------------------------------------------


def test_a_file_over_the_size_limit_is_refused_not_truncated(tmp_path: Path) -> None:
    at_limit, over = tmp_path / "at.yaml", tmp_path / "over.yaml"
    at_limit.write_bytes(b"#" * limits.MAX_FILE_BYTES)
    over.write_bytes(b"#" * (limits.MAX_FILE_BYTES + 1))
    assert load_jobsets(at_limit) == []
    path, rule, message = refusal(over)
    assert (path, rule) == ("", "file-size")
    assert f"larger than {limits.MAX_FILE_BYTES} bytes" in message
    with pytest.raises(SpecError) as raised:
        load_jobsets(over)
    assert str(raised.value).startswith(f"{over}: larger than")


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero on this system")
def test_an_endless_file_is_read_to_the_limit_only() -> None:
    _, rule, _ = refusal(Path("/dev/zero"))
    assert rule == "file-size"


def test_a_string_source_over_the_limit_is_refused() -> None:
    _, rule, _ = refusal("#" * (limits.MAX_FILE_BYTES + 1) + "\n")
    assert rule == "file-size"
    _, rule, _ = refusal("#" + "é" * (limits.MAX_FILE_BYTES // 2) + "\n")  # 2 bytes each
    assert rule == "file-size"


def test_standard_input_is_read_within_the_limit() -> None:
    big = io.TextIOWrapper(io.BytesIO(b"#" * (limits.MAX_FILE_BYTES + 1)))
    with pytest.raises(SpecError, match="larger than"):
        read_stream(big)
    assert read_stream(io.StringIO("kind: JobSet\n")) == "kind: JobSet\n"


# -- encoding ----------------------------------------------------------------------------------


def test_bytes_that_are_not_utf8_name_the_file_and_the_offset(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"apiVersion: v1\nkind: caf\xe9\n")
    assert refusal(path) == ("", "not-utf8", "not UTF-8 text (byte 24)")


def test_validate_goes_on_with_the_next_file(tmp_path: Path) -> None:
    latin1, good = tmp_path / "latin1.yaml", tmp_path / "good.yaml"
    latin1.write_bytes(b"\xff\xfekind: JobSet\n")
    good.write_text(MINIMAL.replace("REPLICAS", "1"))
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(alias_bomb(9))
    code, out, err = run("validate", str(latin1), "/dev/zero", str(bomb), str(good))
    assert (code, err) == (cli.EXIT_INVALID, "")
    lines = out.splitlines()
    assert lines[0] == f"{latin1}: not UTF-8 text (byte 0)"
    assert lines[1].startswith("/dev/zero: larger than 8388608 bytes")
    assert lines[2].startswith(f"{bomb}: l4[0]: aliases expand to more than 10000 nodes")
    assert len(lines) == 3  # the good file has no problem


def test_stdin_that_is_not_utf8() -> None:
    stdin = io.TextIOWrapper(io.BytesIO(b"kind: \x80\n"))
    code, out, _ = run("validate", "-", stdin=stdin)
    assert (code, out) == (cli.EXIT_INVALID, "<stdin>: not UTF-8 text (byte 6)\n")


# -- YAML aliases and depth --------------------------------------------------------------------


def test_an_alias_bomb_is_refused_before_it_expands() -> None:
    path, rule, message = refusal(alias_bomb(9))
    # l0..l3 cost 10 + 91 + 820 + 7381 nodes: the first alias of l4 crosses 10000.
    assert (path, rule) == ("l4[0]", "yaml-aliases")
    assert "crossed by *l3 at line 5, column 10" in message


def test_anchors_within_the_budget_are_fine() -> None:
    container = "&c {name: c, image: busybox, env: [{name: A, value: '1'}, {name: B, value: '2'}]}"
    rjobs = [
        f"  - name: r{i}\n    template: {{spec: {{template: {{spec: {{restartPolicy: Never, "
        f"containers: [{container if i == 0 else '*c'}]}}}}}}}}"
        for i in range(20)
    ]
    text = "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: js}\n"
    text += "spec:\n  replicatedJobs:\n" + "\n".join(rjobs) + "\n"
    jobset = load_jobset(text)
    assert [
        r.template.spec["template"]["spec"]["containers"][0]["name"] for r in jobset.replicated_jobs
    ] == ["c"] * 20


def test_a_recursive_alias_is_refused() -> None:
    assert refusal("a: &a [1, *a]\n")[:2] == ("a[1]", "yaml-aliases")


def test_an_alias_that_nests_too_deep_is_refused() -> None:
    deep = "x: &x " + "[" * 40 + "]" * 40 + "\n" + "y: " + "[" * 30 + "*x" + "]" * 30 + "\n"
    path, rule, _ = refusal(deep)
    assert rule == "yaml-depth"
    assert path == "y" + "[0]" * 30


@pytest.mark.parametrize("levels", [limits.MAX_DEPTH + 1, 10_000, 200_000])
def test_deep_flow_nesting_is_refused_with_its_path(levels: int) -> None:
    path, rule, message = refusal("[" * levels + "]" * levels)
    assert rule == "yaml-depth"
    assert path == "[0]" * limits.MAX_DEPTH
    assert "line 1, column 65" in message


def test_deep_nesting_in_a_job_template_names_the_file_and_the_path(tmp_path: Path) -> None:
    nested = "".join(f"{'  ' * (i + 7)}a:\n" for i in range(250)) + "  " * 257 + "b: 1\n"
    text = MINIMAL.replace("REPLICAS", "1").replace(
        "            restartPolicy: Never\n",
        "            restartPolicy: Never\n            affinity:\n" + nested,
    )
    file = tmp_path / "deep.yaml"
    file.write_text(text)
    code, out, err = run("validate", str(file))
    assert (code, err) == (cli.EXIT_INVALID, "")
    assert out.startswith(
        f"{file}: spec.replicatedJobs[0].template.spec.template.spec.affinity.a.a."
    )
    assert "nested deeper than 64 levels" in out
    assert out.count("\n") == 1


def test_the_document_of_a_multi_document_file_is_named() -> None:
    text = MINIMAL.replace("REPLICAS", "1") + "---\n" + "x: " + "[" * 70 + "]" * 70 + "\n"
    path, rule, _ = refusal(text)
    assert rule == "yaml-depth"
    assert path.startswith("<document 1>.x[0]")


# -- Python data -------------------------------------------------------------------------------


def test_python_data_too_deep_is_refused_with_its_path() -> None:
    data: dict[str, Any] = {}
    node = data
    for _ in range(5000):  # deeper than Python's recursion limit
        node["a"] = {}
        node = node["a"]
    path, rule, _ = refusal(data)
    assert rule == "depth"
    assert path == ".".join(["a"] * limits.MAX_DEPTH)


def test_python_data_with_a_cycle_is_refused() -> None:
    data: dict[str, Any] = {"kind": "JobSet", "spec": {}}
    data["spec"]["self"] = data
    assert refusal(data)[:2] == ("spec.self", "cycle")


def test_python_data_with_shared_references_is_counted_at_each_use() -> None:
    node: Any = ["lol"] * 10
    for _ in range(7):
        node = [node] * 10  # 10**8 nodes when expanded, a few hundred objects
    _, rule, message = refusal({"kind": "JobSet", "spec": node})
    assert rule == "too-many-nodes"
    assert str(limits.MAX_NODES) in message


def test_a_source_of_the_wrong_type_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="not int"):
        load_jobset(42)  # type: ignore[arg-type]


# -- rendering ---------------------------------------------------------------------------------


def test_render_refuses_too_many_jobs_before_building_any() -> None:
    jobset = load_jobset(MINIMAL.replace("REPLICAS", "1000000"))
    with pytest.raises(SpecError) as raised:
        render(jobset, "ns", max_jobs=limits.MAX_RENDERED_JOBS)
    (problem,) = raised.value.problems
    assert (problem.path, problem.rule) == ("spec.replicatedJobs[0].replicas", "render-job-count")
    assert "1000000 child Jobs" in problem.message
    assert len(render(load_jobset(MINIMAL.replace("REPLICAS", "4")), "ns", max_jobs=4).jobs) == 4


def test_jobsetctl_render_refuses_too_many_jobs(tmp_path: Path) -> None:
    file = tmp_path / "big.yaml"
    file.write_text(MINIMAL.replace("REPLICAS", "1000000"))
    code, out, err = run("render", str(file))
    assert (code, out) == (cli.EXIT_INVALID, "")
    assert err.startswith(f"{file}: spec.replicatedJobs[0].replicas: the JobSet has 1000000")
    file.write_text(MINIMAL.replace("REPLICAS", "3"))
    assert run("render", str(file), "--max-jobs", "2")[0] == cli.EXIT_INVALID
    code, out, _ = run("render", str(file), "--max-jobs", "3")
    assert code == 0
    assert [d["kind"] for d in yaml.safe_load_all(out)] == ["Service", "Job", "Job", "Job"]


# -- real JobSets are far below every limit ----------------------------------------------------


def _depth(node: Any) -> int:
    if isinstance(node, dict):
        return 1 + max((_depth(v) for v in node.values()), default=0)
    if isinstance(node, list):
        return 1 + max((_depth(v) for v in node), default=0)
    return 1


def test_upstream_example_files_load_far_below_the_limits(
    upstream_example: UpstreamExample,
) -> None:
    assert upstream_example.path.stat().st_size < limits.MAX_FILE_BYTES // 100
    assert _depth(upstream_example.document) <= limits.MAX_DEPTH // 3
    loaded = [
        js
        for js in load_jobsets(upstream_example.path)
        if js.to_dict() == load_jobset(upstream_example.document).to_dict()
    ]
    assert loaded, "the example file does not load to the example"


@pytest.mark.parametrize(
    "jobset",
    [
        leader_workers("lw", "busybox", workers=3, leader_command=["a"], worker_command=["b"]),
        pytorch_ddp("ddp", "torch", ["train.py"], nodes=4, procs_per_node=8, gpus_per_node=8),
        jax_multislice("jax", "jax", ["t"], slices=4, hosts_per_slice=4, topology_key="pool"),
    ],
    ids=["leader-workers", "pytorch-ddp", "jax-multislice"],
)
def test_builder_output_loads_from_text_far_below_the_limits(jobset: Any) -> None:
    text = dump_yaml(jobset)
    assert len(text) < limits.MAX_FILE_BYTES // 100
    assert _depth(jobset.to_dict()) <= limits.MAX_DEPTH // 3
    assert load_jobset(text).to_dict() == jobset.to_dict()
