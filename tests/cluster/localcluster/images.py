"""The real node's container images, built without a registry (standard library only).

Built by ``devcluster.py images`` (and ``build``, ``up``). Each image is built from Debian
packages (``mmdebstrap --variant=extract`` with the machine's own apt sources) and PyPI (``uv``
with a hashed lock), packed by :mod:`ociarchive` into a deterministic OCI archive, and cached
in ``~/.cache/airflow-provider-jobset/images/<name>-<key>/image.tar``, where ``<key>`` hashes
the image's inputs (package lists, the lock file, the program files, this recipe). ``up``
imports the archives into the node's containerd; nothing is ever pulled.

* ``devcluster.local/pause:1``: the sandbox image, ``tests/cluster/nodetools/pause`` (Go);
* ``devcluster.local/shell:1``: busybox (``busybox-static``): ``sh``, ``sleep``, ``nc``, ...;
* ``devcluster.local/python-jax:1``: Debian's Python 3, the lock ``images/python.txt`` (JAX
  for CPU, the launcher's dependencies) and ``examples/workloads/*.py`` in
  ``/opt/jobset-examples``;
* ``devcluster.local/kfp-launcher:1``: the KFP components' launcher image, as
  ``kfp_components/Dockerfile`` makes it: the same Debian Python (the python-jax image's base
  layer, stored once), the KFP SDK and the core's dependencies at the versions of the KFP
  side's lock (``requirements/kfp.txt``), and this repository's ``jobset_core`` and
  ``kfp_components``, in ``/opt/kfp-launcher/site`` (first on ``PYTHONPATH``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

from .. import ociarchive
from .common import HERE, REPO, cache_root, die, fmt_secs, log
from .gobuild import build_lock
from .procs import log_tail

#: Bump when a recipe below changes in a way that must rebuild the images.
IMAGE_RECIPE = "2"
PAUSE_REF = "devcluster.local/pause:1"
SHELL_REF = "devcluster.local/shell:1"
PYTHON_REF = "devcluster.local/python-jax:1"
LAUNCHER_REF = "devcluster.local/kfp-launcher:1"
#: File times in every layer are clamped to this (the images do not depend on the date).
EPOCH = 0
CHROOT = shutil.which("chroot") or "/usr/sbin/chroot"
PY_LOCK = HERE / "images" / "python.txt"
KFP_LOCK = REPO / "requirements" / "kfp.txt"
#: The packages of the launcher image, copied from the repository.
LAUNCHER_PACKAGES = ("jobset_core", "kfp_components")
LAUNCHER_SITE = "/opt/kfp-launcher/site"
WORKLOADS = REPO / "examples" / "workloads"
WORKLOADS_IN_IMAGE = "/opt/jobset-examples"
#: Debian packages of the Python image (versions: the machine's Debian release). ``tini``
#: (``-g``) stands in for Argo's emissary as a KFP step's PID 1: it runs the step's command
#: in its own process group and forwards the kubelet's signals to that group.
PYTHON_PACKAGES = [
    "python3-minimal",
    "libpython3-stdlib",
    "libstdc++6",
    "dash",
    "busybox-static",
    "tini",
]
SHELL_PACKAGES = ["busybox-static"]
#: Wheels are chosen for this glibc floor (manylinux_2_28 runs on Debian >= 10).
WHEEL_PLATFORM = "x86_64-manylinux_2_28"
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PASSWD = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
GROUP = "root:x:0:\nnogroup:x:65534:\n"
DROP = ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale", "usr/share/lintian")


def images_root() -> Path:
    return cache_root().parent / "images"


def _sha(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() if isinstance(p, str) else p)
        h.update(b"\0")
    return h.hexdigest()[:20]


def _file_sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def debian_suite() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("VERSION_CODENAME="):
                return line.split("=", 1)[1].strip().strip('"')
    die("cannot tell the Debian release (/etc/os-release has no VERSION_CODENAME)")
    return ""


def apt_sources() -> list[str]:
    """The machine's own apt source files (mmdebstrap reads them as its mirrors)."""
    files = []
    main = Path("/etc/apt/sources.list")
    if main.exists() and any(
        ln.strip() and not ln.lstrip().startswith("#") for ln in main.read_text().splitlines()
    ):
        files.append(str(main))
    d = Path("/etc/apt/sources.list.d")
    if d.is_dir():
        files += sorted(str(p) for p in d.iterdir() if p.suffix in (".list", ".sources"))
    if not files:
        die("no apt sources configured (/etc/apt/sources.list[.d]): cannot build images")
    return files


def workload_files() -> list[Path]:
    return sorted(p for p in WORKLOADS.glob("*.py") if p.is_file())


def launcher_files() -> list[Path]:
    """The files of the packages the launcher image carries (no byte code)."""
    return sorted(
        p
        for name in LAUNCHER_PACKAGES
        for p in (REPO / name).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    )


def launcher_requirements() -> list[str]:
    """What the launcher image installs from PyPI: the core's dependencies and the ``kfp``
    extra, as ``pyproject.toml`` declares them (their versions come from the KFP lock)."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return [*project["dependencies"], *project["optional-dependencies"]["kfp"]]


# --------------------------------------------------------------------------------------
# keys
# --------------------------------------------------------------------------------------


def keys(node_bin: Path) -> dict[str, str]:
    suite = debian_suite()
    base = _sha(IMAGE_RECIPE, "python-base", suite, *PYTHON_PACKAGES, PY_LOCK.read_bytes())
    work = _sha(*(f"{p.name}:{_file_sha(p)}" for p in workload_files()))
    kfp = _sha(IMAGE_RECIPE, "kfp-deps", base, KFP_LOCK.read_bytes(), *launcher_requirements())
    ours = _sha(*(f"{p.relative_to(REPO)}:{_file_sha(p)}" for p in launcher_files()))
    return {
        "pause": _sha(IMAGE_RECIPE, "pause", _file_sha(node_bin / "pause")),
        "shell": _sha(IMAGE_RECIPE, "shell", suite, *SHELL_PACKAGES),
        "python-base": base,
        "python": _sha(IMAGE_RECIPE, "python", base, work),
        "kfp-deps": kfp,
        "launcher": _sha(IMAGE_RECIPE, "launcher", kfp, ours),
    }


def _cached(name: str, key: str, what: str = "image.tar") -> Path | None:
    d = images_root() / f"{name}-{key}"
    if (d / "manifest.json").exists() and (d / what).exists():
        return d
    return None


def _record(name: str, key: str) -> dict:
    d = images_root() / f"{name}-{key}"
    info = json.loads((d / "manifest.json").read_text())
    return {
        "name": name,
        "ref": info["ref"],
        "archive": str(d / "image.tar"),
        "digest": info["digest"],
        "size": info["size"],
    }


IMAGE_NAMES = ("pause", "shell", "python", "launcher")


def cached_images(node_bin: Path) -> dict[str, dict] | None:
    """The archives of the current keys, or None when one is missing."""
    k = keys(node_bin)
    out = {}
    for name in IMAGE_NAMES:
        if not _cached(name, k[name]):
            return None
        out[name] = _record(name, k[name])
    return out


# --------------------------------------------------------------------------------------
# build
# --------------------------------------------------------------------------------------


def build(node_bin: Path, quiet: bool = False) -> dict[str, dict]:
    """Build (or reuse) every image; return ``{name: {ref, archive, digest, size}}``."""
    existing = cached_images(node_bin)
    if existing:
        if not quiet:
            log(f"images are cached in {images_root()} (warm, nothing to build)")
        return existing
    with build_lock():
        k = keys(node_bin)
        images_root().mkdir(parents=True, exist_ok=True)
        steps = [
            ("pause", PAUSE_REF, lambda work: _pause_layers(node_bin, work)),
            ("shell", SHELL_REF, _shell_layers),
            ("python", PYTHON_REF, lambda work: _python_layers(k["python-base"], work)),
            ("launcher", LAUNCHER_REF, lambda work: _launcher_layers(k, work)),
        ]
        for name, ref, layers_fn in steps:
            if _cached(name, k[name]):
                continue
            _build_one(name, ref, k[name], layers_fn)
        _prune()
        return cached_images(node_bin) or {}


@contextlib.contextmanager
def _building(name: str, key: str) -> Iterator[Path]:
    """A fresh work folder for ``<images>/<name>-<key>``: moved into place when the block ends
    well, removed when it does not."""
    final = images_root() / f"{name}-{key}"
    work = images_root() / f"{name}-{key}.partial-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        yield work
        shutil.rmtree(final, ignore_errors=True)
        os.rename(work, final)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _build_one(name: str, ref: str, key: str, layers_fn) -> None:
    t = time.monotonic()
    log(f"image {ref}: building (cache key {key})")
    with _building(name, key) as work:
        layers, config, extra = layers_fn(work)
        digest = ociarchive.write_image(
            work / "image.tar", layers, ref=ref, config=config, epoch=EPOCH
        )
        size = (work / "image.tar").stat().st_size
        for layer in layers:
            if layer.path.parent == work:
                layer.path.unlink()
        shutil.rmtree(work / "rootfs", ignore_errors=True)
        manifest = {
            "ref": ref,
            "key": key,
            "digest": digest,
            "size": size,
            "layers": [{"digest": layer.digest, "size": layer.size} for layer in layers],
            "build_seconds": round(time.monotonic() - t, 1),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            **extra,
        }
        (work / "manifest.json").write_text(json.dumps(manifest, indent=2))
    log(
        f"image {ref}: {size / 1e6:.0f} MB, {digest[:19]}, built in "
        f"{fmt_secs(time.monotonic() - t)}"
    )


def _prune(keep: int = 2) -> None:
    """Drop abandoned partial builds and all but the newest ``keep`` builds of each image."""
    groups: dict[str, list[Path]] = {}
    for d in images_root().iterdir():
        m = re.match(r"(.+)-[0-9a-f]{20}(?:\.partial-(\d+))?$", d.name)
        if not m or not d.is_dir():
            continue
        if m.group(2):
            if not Path(f"/proc/{m.group(2)}").exists():
                shutil.rmtree(d, ignore_errors=True)
            continue
        groups.setdefault(m.group(1), []).append(d)
    for dirs in groups.values():
        dirs.sort(key=lambda d: d.stat().st_mtime, reverse=True)
        for d in dirs[keep:]:
            shutil.rmtree(d, ignore_errors=True)


def _run(cmd: list[str], what: str, log_file: Path, **kw) -> None:
    with open(log_file, "ab") as lf:
        lf.write(f"--- {' '.join(cmd)}\n".encode())
        lf.flush()
        r = subprocess.run(cmd, stdout=lf, stderr=subprocess.STDOUT, check=False, **kw)
    if r.returncode != 0:
        die(f"{what} failed (exit {r.returncode}); log {log_file}:\n{log_tail(str(log_file))}")


def _debian_rootfs(rootfs: Path, packages: list[str], work: Path) -> list[str]:
    """Unpack ``packages`` and their dependencies (no maintainer scripts) into ``rootfs``;
    return the .deb files used."""
    t = time.monotonic()
    env = dict(os.environ, SOURCE_DATE_EPOCH=str(EPOCH))
    _run(
        [
            "mmdebstrap",
            "--mode=root",
            "--variant=extract",
            "--include=" + ",".join(packages),
            "--skip=cleanup/apt/cache",  # to list the packages used; removed below
            debian_suite(),
            str(rootfs),
            *apt_sources(),
        ],
        "mmdebstrap",
        work / "build.log",
        env=env,
    )
    archives = rootfs / "var" / "cache" / "apt" / "archives"
    used = sorted(urllib.parse.unquote(p.name) for p in archives.glob("*.deb"))
    for rel in DROP:
        shutil.rmtree(rootfs / rel, ignore_errors=True)
    for rel in ("var/cache/apt", "var/lib/apt/lists", "var/log"):
        shutil.rmtree(rootfs / rel, ignore_errors=True)
        (rootfs / rel).mkdir(parents=True, exist_ok=True)
    log(f"    Debian rootfs: {len(used)} packages ({fmt_secs(time.monotonic() - t)})")
    return used


def _etc(rootfs: Path) -> None:
    (rootfs / "etc").mkdir(exist_ok=True)
    (rootfs / "etc" / "passwd").write_text(PASSWD)
    (rootfs / "etc" / "group").write_text(GROUP)
    tmp = rootfs / "tmp"
    tmp.mkdir(exist_ok=True)
    os.chmod(tmp, 0o1777)


def _busybox_applets(rootfs: Path) -> None:
    """``/bin/<applet> -> busybox`` for every busybox applet the rootfs lacks."""
    busybox = rootfs / "bin" / "busybox"
    if not busybox.exists():
        busybox = rootfs / "usr" / "bin" / "busybox"
    applets = subprocess.run(
        [str(busybox), "--list"], capture_output=True, text=True, check=True
    ).stdout.split()
    dirs = ("bin", "sbin", "usr/bin", "usr/sbin")
    for applet in applets:
        if any(os.path.lexists(rootfs / d / applet) for d in dirs):
            continue
        (rootfs / "bin" / applet).symlink_to("busybox")


def _layer(rootfs: Path, out: Path, comment: str) -> ociarchive.Layer:
    layer = ociarchive.write_layer(rootfs, out, epoch=EPOCH, exclude=("dev",))
    return ociarchive.Layer(layer.path, layer.digest, layer.size, comment)


def _pause_layers(node_bin: Path, work: Path):
    rootfs = work / "rootfs"
    rootfs.mkdir()
    shutil.copy(node_bin / "pause", rootfs / "pause")
    os.chmod(rootfs / "pause", 0o755)
    layer = _layer(rootfs, work / "layer.tar", "pause: tests/cluster/nodetools/pause")
    config = {"Entrypoint": ["/pause"], "Env": [PATH_ENV], "WorkingDir": "/"}
    return [layer], config, {}


def _shell_layers(work: Path):
    rootfs = work / "rootfs"
    debs = _debian_rootfs(rootfs, SHELL_PACKAGES, work)
    _busybox_applets(rootfs)
    _etc(rootfs)
    layer = _layer(rootfs, work / "layer.tar", "shell: Debian " + " ".join(debs))
    config = {"Cmd": ["sh"], "Env": [PATH_ENV], "WorkingDir": "/"}
    return [layer], config, {"debian_packages": debs}


def _base_layer(base_key: str) -> tuple[ociarchive.Layer, dict]:
    """The Python images' shared base layer (built once), and what its manifest says."""
    base = _cached("python-base", base_key, "layer.tar")
    if base is None:
        base = _python_base(base_key)
    base_info = json.loads((base / "manifest.json").read_text())
    base_layer = ociarchive.Layer(
        base / "layer.tar", base_info["digest"], base_info["size"], base_info["comment"]
    )
    return base_layer, base_info


def _python_layers(base_key: str, work: Path):
    base_layer, base_info = _base_layer(base_key)
    rootfs = work / "rootfs"
    target = rootfs / WORKLOADS_IN_IMAGE.lstrip("/")
    target.mkdir(parents=True)
    for f in workload_files():
        shutil.copy(f, target / f.name)
        os.chmod(target / f.name, 0o644)
    for d in [target, *target.parents]:
        if d == rootfs:
            break
        os.chmod(d, 0o755)
    programs = _layer(rootfs, work / "programs.tar", "programs: examples/workloads/*.py")
    config = {
        "Cmd": ["python3"],
        "Env": [PATH_ENV, "PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1", "LANG=C.UTF-8"],
        "WorkingDir": "/",
    }
    extra = {k: base_info[k] for k in ("debian_packages", "python", "pypi_lock_sha256")}
    return [base_layer, programs], config, extra


def _launcher_layers(k: dict[str, str], work: Path):
    """The KFP launcher image: the base layer, the KFP lock's packages (their own cached
    layer), and this repository's packages (a small layer, rebuilt when they change)."""
    base_layer, base_info = _base_layer(k["python-base"])
    deps = _cached("kfp-deps", k["kfp-deps"], "layer.tar")
    if deps is None:
        deps = _kfp_deps(k["kfp-deps"], base_info["python"])
    deps_info = json.loads((deps / "manifest.json").read_text())
    deps_layer = ociarchive.Layer(
        deps / "layer.tar", deps_info["digest"], deps_info["size"], deps_info["comment"]
    )
    rootfs = work / "rootfs"
    site = rootfs / LAUNCHER_SITE.lstrip("/")
    for f in launcher_files():
        target = site / f.relative_to(REPO)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(f, target)
        os.chmod(target, 0o644)
    for d in sorted({p for p in site.rglob("*") if p.is_dir()} | {site, *site.parents}):
        if d.is_relative_to(rootfs) and d != rootfs:
            os.chmod(d, 0o755)
    ours = _layer(rootfs, work / "launcher.tar", "launcher: " + ", ".join(LAUNCHER_PACKAGES))
    config = {
        "Cmd": ["python3", "-m", "kfp_components.launcher"],
        "Env": [
            PATH_ENV,
            f"PYTHONPATH={LAUNCHER_SITE}",
            "PYTHONUNBUFFERED=1",
            "PYTHONDONTWRITEBYTECODE=1",
            "LANG=C.UTF-8",
        ],
        "WorkingDir": "/",
        "User": "65534",
    }
    extra = {"python": base_info["python"], "kfp_lock_sha256": _file_sha(KFP_LOCK)}
    return [base_layer, deps_layer, ours], config, extra


def _kfp_deps(key: str, py: str) -> Path:
    """The launcher image's PyPI layer: the KFP SDK and the core's dependencies, resolved with
    the KFP side's lock as constraints (so at its versions), in the launcher's site folder."""

    def build(rootfs: Path, work: Path) -> tuple[str, dict]:
        site = rootfs / LAUNCHER_SITE.lstrip("/")
        site.mkdir(parents=True)
        args = ["--constraint", str(KFP_LOCK), *launcher_requirements()]
        _uv_install(site, py, args, "launcher image", work)
        for d in [site, *site.parents]:
            if d == rootfs:
                break
            os.chmod(d, 0o755)
        return f"kfp: PyPI {', '.join(launcher_requirements())} under {KFP_LOCK.name}", {}

    return _cached_layer("kfp-deps", key, "KFP layer", build)


def _python_base(key: str) -> Path:
    """The big layer of the Python image: Debian's Python and the locked PyPI packages."""

    def build(rootfs: Path, work: Path) -> tuple[str, dict]:
        debs = _debian_rootfs(rootfs, PYTHON_PACKAGES, work)
        pythons = sorted(p.name for p in (rootfs / "usr" / "bin").glob("python3.*"))
        pythons = [p for p in pythons if re.fullmatch(r"python3\.\d+", p)]
        if not pythons:
            die(f"no python3.X in the Debian rootfs {rootfs}")
        py = pythons[-1]
        site = rootfs / "usr" / "local" / "lib" / py / "dist-packages"
        _pypi_install(site, py, work)
        jax_version = _finish_python_rootfs(rootfs, site, py, work)
        meta = {
            "debian_packages": debs,
            "python": py,
            "jax": jax_version,
            "pypi_lock_sha256": _file_sha(PY_LOCK),
        }
        return f"python base: Debian {' '.join(debs)}; PyPI {PY_LOCK.name}", meta

    return _cached_layer("python-base", key, "python base layer", build)


def _cached_layer(name: str, key: str, what: str, build) -> Path:
    """Build one layer into ``<images>/<name>-<key>/`` (``layer.tar`` and ``manifest.json``:
    digest, size, comment and what ``build`` adds); ``build(rootfs, work)`` fills the root
    filesystem and returns the layer's comment and those extras."""
    t = time.monotonic()
    log(f"    {what} (cache key {key})")
    with _building(name, key) as work:
        rootfs = work / "rootfs"
        rootfs.mkdir()
        comment, extra = build(rootfs, work)
        layer = _layer(rootfs, work / "layer.tar", comment)
        meta = {"digest": layer.digest, "size": layer.size, "comment": comment, **extra}
        meta["build_seconds"] = round(time.monotonic() - t, 1)
        shutil.rmtree(rootfs)
        (work / "manifest.json").write_text(json.dumps(meta, indent=2))
    log(f"    {what}: {meta['size'] / 1e6:.0f} MB ({fmt_secs(time.monotonic() - t)})")
    return images_root() / f"{name}-{key}"


def _pypi_install(site: Path, py: str, work: Path) -> None:
    """The locked PyPI packages, from their hashed wheels, into the image's site folder."""
    t1 = time.monotonic()
    args = ["--no-deps", "--require-hashes", "-r", str(PY_LOCK)]
    _uv_install(site, py, args, "Python image", work)
    log(f"    PyPI packages from {PY_LOCK.name} ({fmt_secs(time.monotonic() - t1)})")


def _uv_install(site: Path, py: str, args: list[str], what: str, work: Path) -> None:
    """``uv pip install`` of wheels for the image's Python and platform into ``site`` (no
    byte code, files copied); its scripts' folder is dropped."""
    _run(
        [
            _uv(),
            "pip",
            "install",
            "--quiet",
            "--target",
            str(site),
            "--python-version",
            py.removeprefix("python"),
            "--python-platform",
            WHEEL_PLATFORM,
            "--no-compile",
            "--link-mode=copy",
            *args,
        ],
        f"uv pip install ({what})",
        work / "build.log",
        env=dict(os.environ, UV_CACHE_DIR=str(cache_root().parent / "uv-cache")),
    )
    shutil.rmtree(site / "bin", ignore_errors=True)


def _finish_python_rootfs(rootfs: Path, site: Path, py: str, work: Path) -> str:
    """Strip jaxlib, add busybox's applets and /etc, byte-compile, and check that the image's
    Python imports its packages; return the JAX version it reports."""
    t1 = time.monotonic()
    # jaxlib's big library carries its full symbol table (~100 MB): drop it (dynamic
    # symbols stay). Wheels repaired with patchelf are left alone.
    for so in sorted((site / "jaxlib").rglob("*.so")):
        _run(["strip", "--strip-unneeded", str(so)], f"strip {so.name}", work / "build.log")
    _busybox_applets(rootfs)
    _etc(rootfs)
    _compile(rootfs, py, work)
    check = subprocess.run(
        [
            CHROOT,
            str(rootfs),
            f"/usr/bin/{py}",
            "-c",
            "import jax, jax.numpy, numpy, kubernetes, kubernetes_asyncio, pydantic, yaml;"
            "print(jax.__version__)",
        ],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"},
    )
    if check.returncode != 0:
        die(f"the Python image cannot import its packages:\n{check.stderr[-3000:]}")
    log(f"    strip, byte code, import check ({fmt_secs(time.monotonic() - t1)})")
    return check.stdout.strip()


def _compile(rootfs: Path, py: str, work: Path) -> None:
    """Byte-compile the stdlib and the packages with the image's own Python (in a chroot):
    hash-based pycs and a fixed hash seed make the result reproducible."""
    r = subprocess.run(
        [
            CHROOT,
            str(rootfs),
            f"/usr/bin/{py}",
            "-m",
            "compileall",
            "-q",
            "-q",
            "--invalidation-mode",
            "unchecked-hash",
            f"/usr/lib/{py}",
            f"/usr/local/lib/{py}/dist-packages",
        ],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0"},
    )
    # a few stdlib test files are invalid on purpose: compileall reports them and goes on
    (work / "compile.log").write_text(r.stdout + r.stderr)


def _uv() -> str:
    r = subprocess.run(
        ["bash", str(REPO / "scripts" / "venv.sh"), "uv"],
        capture_output=True,
        text=True,
        check=False,
    )
    if r.returncode != 0:
        die(f"scripts/venv.sh uv failed:\n{r.stderr}")
    return r.stdout.strip().splitlines()[-1]
