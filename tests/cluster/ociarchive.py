"""Deterministic OCI image archives from directories (standard library only).

Used by ``devcluster.py`` to build the real node's images without a registry or a container
builder: a root filesystem directory becomes one uncompressed layer, layers and an image config
become an OCI image layout packed in a tar (``ctr images import`` reads it). The same inputs
give byte-identical files: entries are sorted, owners are numeric, modification times are
clamped to ``epoch``, device nodes, sockets and FIFOs are left out (the runtime provides
``/dev``), and JSON is written with sorted keys and no whitespace.

    layer = write_layer(rootfs_dir, "layer.tar", epoch=0)
    write_image("image.tar", [layer], ref="devcluster.local/shell:1",
                config={"Entrypoint": ["/bin/sh"]}, epoch=0)
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

LAYER_MEDIA_TYPE = "application/vnd.oci.image.layer.v1.tar"
CONFIG_MEDIA_TYPE = "application/vnd.oci.image.config.v1+json"
MANIFEST_MEDIA_TYPE = "application/vnd.oci.image.manifest.v1+json"
INDEX_MEDIA_TYPE = "application/vnd.oci.image.index.v1+json"
#: containerd names an imported image after this annotation of the index entry.
CONTAINERD_NAME = "io.containerd.image.name"
REF_NAME = "org.opencontainers.image.ref.name"

_CHUNK = 1 << 20


@dataclass(frozen=True)
class Layer:
    """An uncompressed layer tar: its path, sha256 digest (= diff ID) and size."""

    path: Path
    digest: str
    size: int
    comment: str = ""


def _json(obj: object) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def _walk(root: Path) -> list[str]:
    """Every path below ``root``, relative, sorted (parents before children)."""
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel = os.path.relpath(dirpath, root)
        prefix = "" if rel == "." else rel + "/"
        out.extend(prefix + name for name in dirnames)
        out.extend(prefix + name for name in filenames)
    out.sort(key=lambda p: p.split("/"))
    return out


class _HashingWriter:
    """A file wrapper that hashes and counts what is written through it (what tarfile needs:
    ``write`` and ``tell``)."""

    def __init__(self, f) -> None:
        self._f = f
        self.sha = hashlib.sha256()
        self.size = 0

    def write(self, b: bytes) -> int:
        self._f.write(b)
        self.sha.update(b)
        self.size += len(b)
        return len(b)

    def tell(self) -> int:
        return self.size


def write_layer(
    root: Path | str, out: Path | str, *, epoch: int = 0, exclude: tuple[str, ...] = ()
) -> Layer:
    """Pack the directory ``root`` into the uncompressed layer tar ``out``.

    ``exclude``: relative paths left out together with everything below them. Hard links
    inside ``root`` stay hard links; symlinks are stored as they are.
    """
    root = Path(root)
    out = Path(out)
    seen: dict[tuple[int, int], str] = {}
    with open(out, "wb") as raw:
        writer = _HashingWriter(raw)
        with tarfile.open(fileobj=writer, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for rel in _walk(root):
                if any(rel == x or rel.startswith(x + "/") for x in exclude):
                    continue
                path = root / rel
                st = path.lstat()
                info = tarfile.TarInfo(rel)
                info.mode = stat.S_IMODE(st.st_mode)
                info.uid, info.gid = st.st_uid, st.st_gid
                info.uname = info.gname = ""
                info.mtime = min(int(st.st_mtime), epoch)
                if stat.S_ISDIR(st.st_mode):
                    info.type = tarfile.DIRTYPE
                    tar.addfile(info)
                elif stat.S_ISLNK(st.st_mode):
                    info.type = tarfile.SYMTYPE
                    info.linkname = os.readlink(path)
                    tar.addfile(info)
                elif stat.S_ISREG(st.st_mode):
                    key = (st.st_dev, st.st_ino)
                    if st.st_nlink > 1 and key in seen:
                        info.type = tarfile.LNKTYPE
                        info.linkname = seen[key]
                        tar.addfile(info)
                        continue
                    seen[key] = rel
                    info.size = st.st_size
                    with open(path, "rb") as f:
                        tar.addfile(info, f)
                # device nodes, sockets and FIFOs are not part of an image
        return Layer(out, "sha256:" + writer.sha.hexdigest(), writer.size)


def file_layer(path: Path | str) -> Layer:
    """A :class:`Layer` for an existing layer tar (hashes it)."""
    path = Path(path)
    sha = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            sha.update(chunk)
            size += len(chunk)
    return Layer(path, "sha256:" + sha.hexdigest(), size)


def write_image(
    out: Path | str,
    layers: list[Layer],
    *,
    ref: str,
    config: dict,
    epoch: int = 0,
    labels: dict[str, str] | None = None,
) -> str:
    """Write the OCI image layout tar ``out`` of ``layers`` (bottom first); return the
    manifest digest. ``config`` is the image config's ``config`` object (Env, Entrypoint,
    Cmd, WorkingDir, ...); ``ref`` the full reference containerd gives the image."""
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
    image_config = {
        "architecture": "amd64",
        "os": "linux",
        "created": created,
        "config": {**config, **({"Labels": labels} if labels else {})},
        "rootfs": {"type": "layers", "diff_ids": [layer.digest for layer in layers]},
        "history": [
            {"created": created, "created_by": layer.comment or "devcluster layer"}
            for layer in layers
        ],
    }
    config_blob = _json(image_config)
    config_digest = "sha256:" + hashlib.sha256(config_blob).hexdigest()
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "config": {
            "mediaType": CONFIG_MEDIA_TYPE,
            "digest": config_digest,
            "size": len(config_blob),
        },
        "layers": [
            {"mediaType": LAYER_MEDIA_TYPE, "digest": layer.digest, "size": layer.size}
            for layer in layers
        ],
    }
    manifest_blob = _json(manifest)
    manifest_digest = "sha256:" + hashlib.sha256(manifest_blob).hexdigest()
    index = {
        "schemaVersion": 2,
        "mediaType": INDEX_MEDIA_TYPE,
        "manifests": [
            {
                "mediaType": MANIFEST_MEDIA_TYPE,
                "digest": manifest_digest,
                "size": len(manifest_blob),
                "platform": {"architecture": "amd64", "os": "linux"},
                "annotations": {CONTAINERD_NAME: ref, REF_NAME: ref.rpartition(":")[2]},
            }
        ],
    }

    def entry(name: str, size: int, mode: int = 0o644, kind: bytes = tarfile.REGTYPE):
        info = tarfile.TarInfo(name)
        info.size, info.mode, info.mtime, info.type = size, mode, epoch, kind
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    blobs: dict[str, bytes | Path] = {
        config_digest: config_blob,
        manifest_digest: manifest_blob,
        **{layer.digest: layer.path for layer in layers},
    }
    tmp = Path(str(out) + ".tmp")
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in (("oci-layout", _json({"imageLayoutVersion": "1.0.0"})),):
            tar.addfile(entry(name, len(data)), io.BytesIO(data))
        index_blob = _json(index)
        tar.addfile(entry("index.json", len(index_blob)), io.BytesIO(index_blob))
        for d in ("blobs", "blobs/sha256"):
            tar.addfile(entry(d, 0, 0o755, tarfile.DIRTYPE))
        for digest in sorted(blobs):
            data = blobs[digest]
            name = "blobs/sha256/" + digest.split(":", 1)[1]
            if isinstance(data, Path):
                with open(data, "rb") as f:
                    tar.addfile(entry(name, data.stat().st_size), f)
            else:
                tar.addfile(entry(name, len(data)), io.BytesIO(data))
    os.replace(tmp, out)
    return manifest_digest


def read_index(archive: Path | str) -> dict:
    """The ``index.json`` of an image archive written by :func:`write_image`."""
    with tarfile.open(archive) as tar:
        member = tar.extractfile("index.json")
        assert member is not None
        return json.loads(member.read())
