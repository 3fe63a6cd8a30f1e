"""Uploaded assets: content-addressed media files, and the resolver graphs use to read media.

An asset's id is `sha256-<hex>` of its bytes and its file is named by that id, so the same bytes
always give the same id and an asset never changes. The kind is sniffed from the bytes (never from
the client's content type); bytes that are no image, video or audio are refused.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from inline_core.errors import NotFound, PayloadTooLarge, UnsupportedMedia
from inline_core.media import MediaKind, sniff
from inline_core.server.run_store import RunStore
from inline_core.takes import MediaRef

ASSET_ID = re.compile(r"sha256-[0-9a-f]{64}")
TAKE_ID = re.compile(r"tk_[0-9a-f]{1,64}")
SNIFF_BYTES = 64


@dataclass(frozen=True)
class Asset:
    id: str
    kind: MediaKind
    content_type: str
    size: int
    path: Path


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def inside(path: Path, root: Path) -> bool:
    """Whether `path`, with every link followed, lies under `root`."""
    try:
        path.resolve().relative_to(root.resolve())
    except (ValueError, OSError):
        return False
    return True


class AssetUpload:
    """One upload in progress: bytes are hashed and spilled to a temp file as they arrive, so
    memory stays flat and a body over the limit is refused as soon as it crosses it."""

    def __init__(self, store: AssetStore) -> None:
        self._store = store
        fd, tmp = tempfile.mkstemp(dir=store.root, prefix=".upload-")
        self._tmp = Path(tmp)
        self._file: BinaryIO = os.fdopen(fd, "wb")
        self._hash = hashlib.sha256()
        self._head = b""
        self.size = 0

    def write(self, chunk: bytes) -> None:
        if self.size + len(chunk) > self._store.max_bytes:
            self.abort()
            raise PayloadTooLarge(
                f"upload is larger than the {self._store.max_bytes // (1024 * 1024)} MB limit"
            )
        if len(self._head) < SNIFF_BYTES:
            self._head += chunk[: SNIFF_BYTES - len(self._head)]
        self._hash.update(chunk)
        self._file.write(chunk)
        self.size += len(chunk)

    def finish(self) -> Asset:
        """Check the bytes are media, make the file durable and give it its content name."""
        try:
            if self.size == 0:
                raise UnsupportedMedia("the upload is empty")
            sniffed = sniff(self._head)
            if sniffed is None:
                raise UnsupportedMedia("the uploaded bytes are not an image, video or audio file")
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            asset_id = "sha256-" + self._hash.hexdigest()
            final = self._store.root / asset_id
            os.replace(self._tmp, final)
            _fsync_dir(self._store.root)
        except BaseException:
            self.abort()
            raise
        kind, content_type = sniffed
        return Asset(asset_id, kind, content_type, self.size, final)

    def abort(self) -> None:
        if not self._file.closed:
            self._file.close()
        self._tmp.unlink(missing_ok=True)


class AssetStore:
    def __init__(self, root: Path, max_bytes: int) -> None:
        self.root = root
        self.max_bytes = max_bytes
        root.mkdir(parents=True, exist_ok=True)

    def begin(self) -> AssetUpload:
        return AssetUpload(self)

    def save(self, data: bytes) -> Asset:
        upload = self.begin()
        upload.write(data)
        return upload.finish()

    def path(self, asset_id: str) -> Path:
        """The file of asset `asset_id`; NotFound for an unknown or malformed id."""
        if not ASSET_ID.fullmatch(asset_id):
            raise NotFound(f"no asset {asset_id!r}")
        path = self.root / asset_id
        if not path.is_file() or not inside(path, self.root):
            raise NotFound(f"no asset {asset_id!r}")
        return path

    def get(self, asset_id: str) -> Asset:
        path = self.path(asset_id)
        with path.open("rb") as f:
            head = f.read(SNIFF_BYTES)
        sniffed = sniff(head)
        if sniffed is None:  # only a file placed here by hand could get here
            raise NotFound(f"no asset {asset_id!r}")
        kind, content_type = sniffed
        return Asset(asset_id, kind, content_type, path.stat().st_size, path)


class StoredMediaResolver:
    """`MediaResolver` over uploaded assets and recorded takes. A path never leaves its root."""

    def __init__(self, assets: AssetStore, runs: RunStore, takes_root: Path) -> None:
        self.assets = assets
        self.runs = runs
        self.takes_root = takes_root

    def take_path(self, take_id: str) -> Path:
        if not TAKE_ID.fullmatch(take_id):
            raise NotFound(f"no take {take_id!r}")
        take = self.runs.get_take(take_id)
        if take is None:
            raise NotFound(f"no take {take_id!r}")
        path = Path(take.path)
        if not inside(path, self.takes_root) or not path.is_file():
            raise NotFound(f"the file of take {take_id!r} is missing")
        return path

    def resolve(self, ref: MediaRef) -> Path:
        if ref.ref == "asset":
            return self.assets.path(ref.id)
        return self.take_path(ref.id)
