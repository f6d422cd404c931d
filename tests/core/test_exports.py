"""The public surface is exact, and importing the core never imports a Kubernetes client."""

from __future__ import annotations

import jobset_core
from tests._fresh import fresh_python


def test_all_is_sorted_and_resolvable() -> None:
    names = jobset_core.__all__
    assert names == sorted(names)
    for name in names:
        assert getattr(jobset_core, name) is not None, name


def test_public_names_are_exactly_all() -> None:
    # Every public name but the version is imported on first use (importing the package, or
    # the CLI in it, costs nothing until then); dir() shows what can be used.
    assert dir(jobset_core) == jobset_core.__all__
    assert set(jobset_core._LAZY) | {"__version__"} == set(jobset_core.__all__)
    public = {n for n in vars(jobset_core) if not n.startswith("_")}
    # Submodules become attributes once imported; they are not part of the surface.
    modules = {n for n in public if type(getattr(jobset_core, n)).__name__ == "module"}
    assert public - modules - {"annotations", "TYPE_CHECKING", "Any"} <= set(jobset_core.__all__)


def test_import_does_not_load_api_clients() -> None:
    code = (
        "import sys, jobset_core, jobset_core.models, jobset_core.policy, jobset_core.render;"
        "heavy = ('kubernetes', 'kubernetes_asyncio', 'airflow', 'kfp');"
        "bad = [m for m in heavy if m in sys.modules];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = fresh_python(code, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_jobsetctl_validate_and_render_start_without_the_cluster_layers() -> None:
    """``validate`` and ``render`` need no cluster: their start imports neither the lifecycle
    nor the client nor asyncio (a tenth of a second of a 0.4 s answer, measured in
    ``make bench``'s ``local`` family)."""
    example = "examples/jobsets/hello.yaml"
    code = (
        "import sys; from jobset_core.cli import main;"
        f"codes = [main(['validate', {example!r}]), main(['render', {example!r}])];"
        "heavy = ('jobset_core.lifecycle', 'jobset_core.client', 'jobset_core.observe',"
        " 'asyncio', 'kubernetes_asyncio', 'aiohttp');"
        "bad = [m for m in heavy if m in sys.modules];"
        "print(codes, bad, file=sys.stderr); sys.exit(1 if bad or any(codes) else 0)"
    )
    result = fresh_python(code, check=False)
    assert result.returncode == 0, result.stderr
