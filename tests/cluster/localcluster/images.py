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
* ``devcluster.local/python-torch:1``: Debian's CPU build of PyTorch (``python3-torch``) on
  the same Debian Python, cut down to what ``torch`` loads (see :func:`_torch_rootfs`), and
  ``examples/workloads/*.py`` in ``/opt/jobset-examples``;
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
from .common import HERE, REPO, cache_root, die, exclusive, fmt_secs, log
from .procs import log_tail

#: Bump when a recipe below changes in a way that must rebuild the images.
IMAGE_RECIPE = "2"
PAUSE_REF = "devcluster.local/pause:1"
SHELL_REF = "devcluster.local/shell:1"
PYTHON_REF = "devcluster.local/python-jax:1"
LAUNCHER_REF = "devcluster.local/kfp-launcher:1"
TORCH_REF = "devcluster.local/python-torch:1"
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
#: The torch image: Debian's CPU PyTorch (bookworm: 1.13) on the Python image's packages. Its
#: Depends unpack to ~1.3 GB (OpenCV, ffmpeg, GDAL, Qt5, LLVM, ...); the image keeps the Python
#: packages that ``TORCH_IMPORTS`` load and the shared libraries they need (:func:`_torch_rootfs`).
TORCH_PACKAGES = [*PYTHON_PACKAGES, "python3-torch"]
TORCH_IMPORTS = (
    "torch",
    "torch.distributed",
    "torch.distributed.run",
    "torch.multiprocessing",
    "torch.nn.parallel",
    "torch.optim",
    "torch.utils.data",
)
#: Bump when the torch image's recipe changes (the other images keep their keys).
TORCH_RECIPE = "1"
#: Programs of the torch image (``bin``/``usr/bin``): every other program of its packages goes.
TORCH_PROGRAMS = ("busybox", "dash", "python3", "sh", "tini", "torchrun")
#: Where the dynamic loader looks (Debian's multiarch order); a library found only in a folder
#: below ``usr/lib/<triplet>`` (what update-alternatives links, e.g. ``blas/libblas.so.3``)
#: gets the link the alternative would have made.
LIBRARY_DIRS = ("lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "lib", "usr/lib", "lib64")
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


def keys(node_bin: Path | None) -> dict[str, str]:
    """The cache key of every image and cached layer (``pause`` only with the node's binaries:
    its one program is the node build's)."""
    suite = debian_suite()
    base = _sha(IMAGE_RECIPE, "python-base", suite, *PYTHON_PACKAGES, PY_LOCK.read_bytes())
    work = _sha(*(f"{p.name}:{_file_sha(p)}" for p in workload_files()))
    kfp = _sha(IMAGE_RECIPE, "kfp-deps", base, KFP_LOCK.read_bytes(), *launcher_requirements())
    ours = _sha(*(f"{p.relative_to(REPO)}:{_file_sha(p)}" for p in launcher_files()))
    torch = _sha(IMAGE_RECIPE, "torch-base", TORCH_RECIPE, suite, *TORCH_PACKAGES, *TORCH_IMPORTS)
    return {
        "pause": _sha(IMAGE_RECIPE, "pause", _file_sha(node_bin / "pause")) if node_bin else "",
        "shell": _sha(IMAGE_RECIPE, "shell", suite, *SHELL_PACKAGES),
        "python-base": base,
        "python": _sha(IMAGE_RECIPE, "python", base, work),
        "kfp-deps": kfp,
        "launcher": _sha(IMAGE_RECIPE, "launcher", kfp, ours),
        "torch-base": torch,
        "torch": _sha(IMAGE_RECIPE, "torch", torch, work),
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


IMAGE_NAMES = ("pause", "shell", "python", "launcher", "torch")


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
    _build_all(node_bin)
    return cached_images(node_bin) or {}


def build_early() -> None:
    """Build (or reuse) every image that needs no node binary: all but ``pause``. Mostly
    downloads, unpacking and writing archives, so it runs beside the control plane's Go build
    (``lifecycle.cmd_build``); :func:`build` then has only ``pause`` left."""
    _build_all(None)


def _build_all(node_bin: Path | None) -> None:
    with images_lock():
        k = keys(node_bin)
        images_root().mkdir(parents=True, exist_ok=True)
        steps = [
            ("shell", SHELL_REF, _shell_layers),
            ("python", PYTHON_REF, lambda work: _python_layers(k["python-base"], work)),
            ("launcher", LAUNCHER_REF, lambda work: _launcher_layers(k, work)),
            ("torch", TORCH_REF, lambda work: _torch_layers(k["torch-base"], work)),
        ]
        if node_bin:
            steps.insert(0, ("pause", PAUSE_REF, lambda work: _pause_layers(node_bin, work)))
        for name, ref, layers_fn in steps:
            if not _cached(name, k[name]):
                _build_one(name, ref, k[name], layers_fn)
        _prune()


def images_lock():
    """One image build at a time on this machine, across checkouts (Go builds have their own
    lock: the two may run at once)."""
    return exclusive(images_root() / ".images.lock", "devcluster image build")


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


def _base_layer(base_key: str, name: str = "python-base") -> tuple[ociarchive.Layer, dict]:
    """An image's big cached base layer (built once; the Python images share theirs), and
    what its manifest says."""
    base = _cached(name, base_key, "layer.tar")
    if base is None:
        base = (_torch_base if name == "torch-base" else _python_base)(base_key)
    base_info = json.loads((base / "manifest.json").read_text())
    base_layer = ociarchive.Layer(
        base / "layer.tar", base_info["digest"], base_info["size"], base_info["comment"]
    )
    return base_layer, base_info


def _programs_layer(work: Path) -> ociarchive.Layer:
    """``examples/workloads/*.py`` in ``/opt/jobset-examples`` (a small layer of its own)."""
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
    return _layer(rootfs, work / "programs.tar", "programs: examples/workloads/*.py")


PYTHON_CONFIG = {
    "Cmd": ["python3"],
    "Env": [PATH_ENV, "PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1", "LANG=C.UTF-8"],
    "WorkingDir": "/",
}


def _python_layers(base_key: str, work: Path):
    base_layer, base_info = _base_layer(base_key)
    programs = _programs_layer(work)
    extra = {k: base_info[k] for k in ("debian_packages", "python", "pypi_lock_sha256")}
    return [base_layer, programs], dict(PYTHON_CONFIG), extra


def _torch_layers(base_key: str, work: Path):
    base_layer, base_info = _base_layer(base_key, "torch-base")
    programs = _programs_layer(work)
    extra = {k: base_info[k] for k in ("debian_packages", "python", "torch", "kept")}
    return [base_layer, programs], dict(PYTHON_CONFIG), extra


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


def _torch_base(key: str) -> Path:
    """The torch image's layer: ``TORCH_PACKAGES`` unpacked, then cut down to what torch
    loads (:func:`_torch_rootfs`), byte-compiled, and checked by a real all-reduce."""

    def build(rootfs: Path, work: Path) -> tuple[str, dict]:
        debs = _debian_rootfs(rootfs, TORCH_PACKAGES, work)
        t1 = time.monotonic()
        py, kept = _torch_rootfs(rootfs, work)
        _busybox_applets(rootfs)
        _etc(rootfs)
        _compile(rootfs, py, work, f"/usr/lib/{py}", "/usr/lib/python3/dist-packages")
        version = _torch_check(rootfs, py)
        took = fmt_secs(time.monotonic() - t1)
        log(f"    cut to what torch loads, byte code, all-reduce check ({took})")
        meta = {"debian_packages": debs, "python": py, "torch": version, "kept": kept}
        return f"python-torch base: Debian {' '.join(debs)}; kept what torch loads", meta

    return _cached_layer("torch-base", key, "torch base layer", build)


def _elf_dynamic(path: Path) -> tuple[list[str], list[str]]:
    """The ``NEEDED`` names and the ``RUNPATH``/``RPATH`` folders of an ELF file."""
    out = subprocess.run(
        ["readelf", "-dW", str(path)], capture_output=True, text=True, check=False
    ).stdout
    needed: list[str] = []
    runpath: list[str] = []
    for line in out.splitlines():
        m = re.search(r"\((NEEDED|RUNPATH|RPATH)\)\s+\S+ \S+ \[(.*)\]", line)
        if m and m.group(1) == "NEEDED":
            needed.append(m.group(2))
        elif m:
            runpath += m.group(2).split(":")
    return needed, runpath


def _is_elf(path: Path) -> bool:
    if path.is_symlink() or not path.is_file():
        return False
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def _keep_chain(rootfs: Path, path: Path, keep: set[Path]) -> Path:
    """Keep ``path`` and every link on the way to the file it names (inside ``rootfs``);
    return that file."""
    for _ in range(40):
        keep.add(path)
        if not path.is_symlink():
            return path
        target = os.readlink(path)
        path = rootfs / target.lstrip("/") if target.startswith("/") else path.parent / target
        path = Path(os.path.normpath(path))
        if not path.is_relative_to(rootfs):
            return path
    return path


def _torch_rootfs(rootfs: Path, work: Path) -> tuple[str, dict[str, object]]:
    """Cut the unpacked ``TORCH_PACKAGES`` down to what torch needs, in place.

    Kept: ``etc``, ``var``, the standard library (no ``test``), ``TORCH_PROGRAMS``, the
    packages of ``usr/lib/python3/dist-packages`` that importing ``TORCH_IMPORTS`` loads (in
    a chroot of the full tree: ``sys.modules``; torch's C++ test programs in ``torch/bin``
    excepted), and the shared libraries all of their ELF files need (``NEEDED``,
    transitively) or that the importing process mapped (its ``/proc/<pid>/maps``: what it
    ``dlopen``ed too). Every other file goes (``usr/share``, the other programs and
    libraries). torch's own libraries need OpenCV, ffmpeg and (through them) GDAL and Qt5
    at load time, so those stay: ~600 of ~1,100 MB. Returns the Python and the counts of
    files kept and removed (and the programs left out for a missing library)."""
    pythons = sorted(p.name for p in (rootfs / "usr" / "bin").glob("python3.*"))
    pythons = [p for p in pythons if re.fullmatch(r"python3\.\d+", p)]
    if not pythons:
        die(f"no python3.X in the Debian rootfs {rootfs}")
    py = pythons[-1]
    keep: set[Path] = set()
    resolved: dict[str, Path | None] = {}

    def find(name: str, runpath: list[str], origin: Path) -> Path | None:
        dirs = [
            (origin / d.removeprefix("$ORIGIN").lstrip("/"))
            if d.startswith("$ORIGIN")
            else rootfs / d.lstrip("/")
            for d in runpath
        ]
        dirs += [rootfs / d for d in LIBRARY_DIRS]
        for d in dirs:
            if os.path.lexists(d / name):
                return d / name
        if name not in resolved:
            triplet = rootfs / LIBRARY_DIRS[1]
            found = sorted(triplet.glob(f"*/{name}"))
            resolved[name] = None
            if found:  # an alternative: link it where the loader looks
                link = triplet / name
                link.symlink_to(found[0].relative_to(triplet))
                resolved[name] = link
        return resolved[name]

    broken: set[Path] = set()  # ELF files needing a library no package ships (tests)

    def closure(roots: list[Path]) -> None:
        todo = list(roots)
        done: set[Path] = set()
        while todo:
            real = _keep_chain(rootfs, todo.pop(), keep)
            if real in done or not _is_elf(real):
                continue
            done.add(real)
            needed, runpath = _elf_dynamic(real)
            for name in needed:
                lib = find(name, runpath, real.parent)
                if lib is None:
                    broken.add(real)
                else:
                    todo.append(lib)

    site = rootfs / "usr" / "lib" / "python3" / "dist-packages"
    stdlib = rootfs / "usr" / "lib" / py
    programs = [
        rootfs / d / name
        for d in ("bin", "usr/bin")
        for name in (*TORCH_PROGRAMS, py)
        if os.path.lexists(rootfs / d / name)
    ]
    # What the import loads needs its libraries first (the alternatives' links included).
    extensions = [*sorted((stdlib / "lib-dynload").glob("*.so")), *sorted(site.rglob("*.so"))]
    closure([*programs, *extensions])
    code = (
        "import json, os, sys\n"
        + "".join(f"import {m}\n" for m in TORCH_IMPORTS)
        + "files = sorted({getattr(m, '__file__', None) or '' for m in [*sys.modules.values()]})\n"
        "print(json.dumps({'pid': os.getpid(), 'files': files}), flush=True)\n"
        "sys.stdin.read()\n"  # mapped until the builder has read its /proc/<pid>/maps
    )
    proc = subprocess.Popen(
        [CHROOT, str(rootfs), f"/usr/bin/{py}", "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert proc.stdin and proc.stdout and proc.stderr
    line = proc.stdout.readline()
    try:
        trace = json.loads(line)
        # the loader's view: every file mapped, the dlopened ones too (paths from the host)
        regions = Path(f"/proc/{trace['pid']}/maps").read_text().splitlines()
    except (ValueError, OSError):
        proc.kill()
        die(f"torch image: the full tree cannot import torch:\n{proc.stderr.read()[-3000:]}")
    proc.stdin.close()
    proc.wait()
    mapped = sorted({r.split(None, 5)[5] for r in regions if len(r.split(None, 5)) == 6})
    packages = set()
    for f in trace["files"]:
        p = rootfs / f.lstrip("/")
        if p.is_relative_to(site):
            packages.add(p.relative_to(site).parts[0].split(".")[0])
    kept_site = [
        p
        for p in sorted(site.iterdir())
        if p.name.split(".")[0] in packages
        or (p.suffix in (".dist-info", ".egg-info") and p.name.split("-")[0] in packages)
    ]
    for p in kept_site:
        keep.add(p)
        keep.update(p.rglob("*"))
    keep.update(p for p in stdlib.rglob("*") if p.relative_to(stdlib).parts[0] != "test")
    for top in ("dev", "etc", "var", "tmp", "root", "run", "lib64"):
        keep.update((rootfs / top).rglob("*"))
    loaded = [Path(m) for m in mapped if Path(m).is_relative_to(rootfs) and Path(m).is_file()]
    elves = [p for p in sorted(keep) if _is_elf(p)]
    # the C++ test programs in torch/bin (its torch_shm_manager stays: torch needs it)
    torch_bin = site / "torch" / "bin"
    tests = {p for p in elves if p.parent == torch_bin and p.name != "torch_shm_manager"}
    keep -= tests
    elves = [p for p in elves if p not in tests]
    # the libraries of what is kept, and everything the import mapped
    closure([*programs, *elves, *loaded])
    keep -= broken
    kept = removed = 0
    for dirpath, dirnames, filenames in os.walk(rootfs, topdown=False):
        d = Path(dirpath)
        for name in filenames + [n for n in dirnames if (d / n).is_symlink()]:
            p = d / name
            if p in keep:
                kept += 1
            else:
                p.unlink()
                removed += 1
        if rootfs not in (d, d.parent) and not any(d.iterdir()):
            d.rmdir()
    # links whose target went (torch/lib/*.so of the libraries nothing loads)
    for p in sorted(rootfs.rglob("*")):
        if p.is_symlink() and not _keep_chain(rootfs, p, set()).exists():
            p.unlink()
            kept -= 1
            removed += 1
    gone = sorted(str(p.relative_to(rootfs)) for p in broken)
    if gone:
        log(f"    torch image: left out {len(gone)} programs that need missing libraries")
    return py, {"files_kept": kept, "files_removed": removed, "left_out": gone}


def _torch_check(rootfs: Path, py: str) -> str:
    """Two processes under the image's ``torchrun`` all-reduce over gloo on 127.0.0.1 (in a
    chroot of the cut tree): what was cut was not needed. Returns torch's version."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    program = (
        "import os, torch, torch.distributed as d\n"
        "d.init_process_group('gloo')\n"
        "t = torch.tensor([float(os.environ['RANK']) + 1.0])\n"
        "d.all_reduce(t)\n"
        "assert t.item() == 3.0, t\n"
        "if d.get_rank() == 0:\n"  # one line: two processes' prints would interleave
        "    print('torch', torch.__version__, flush=True)\n"
        "d.destroy_process_group()\n"
    )
    (rootfs / "tmp" / "torch_check.py").write_text(program)
    try:
        r = subprocess.run(
            [
                CHROOT,
                str(rootfs),
                f"/usr/bin/{py}",
                "/usr/bin/torchrun",
                "--nnodes=1",
                "--nproc_per_node=2",
                "--redirects=2",
                "--tee=2",
                "--master_addr=127.0.0.1",
                f"--master_port={port}",
                "/tmp/torch_check.py",
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
            env={"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8"},
        )
    finally:  # the program, and torchrun's logs (random names): /tmp stays empty
        for entry in (rootfs / "tmp").iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    m = re.search(r"torch (\S+)", r.stdout)
    if r.returncode != 0 or m is None:
        die(f"torch image: the all-reduce check failed:\n{(r.stdout + r.stderr)[-3000:]}")
        return ""
    return m.group(1)


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


def _compile(rootfs: Path, py: str, work: Path, *dirs: str) -> None:
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
            *(dirs or (f"/usr/lib/{py}", f"/usr/local/lib/{py}/dist-packages")),
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
