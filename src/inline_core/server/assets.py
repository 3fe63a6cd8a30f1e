"""Uploaded assets: content-addressed media files, and the resolver graphs use to read media.

An asset's id is `sha256-<hex>` of its bytes and its file is named by that id, so the same bytes
always give the same id and an asset never changes. The kind is sniffed from the bytes (never from
the client's content type); bytes that are no image, video or audio are refused, and so is an image
Pillow cannot read or one with more pixels than the limit (a decompression bomb: a few kilobytes
that would decode to gigabytes). The pixel limit is checked again whenever a graph opens an image.

Disk budget (`DiskBudget`): an upload is refused with 507 `insufficient_storage` when the data
disk's free space would drop below a floor (kept for takes and the run database), or when the
assets folder would grow past its cap. Free space is read before the first byte (with the declared
Content-Length) and again every `RECHECK_BYTES` while the body streams in. The cap is settled when
the upload is complete, because only then is its id known: the same bytes again never grow the
folder and are always accepted. Bytes of uploads in flight count against it, so concurrent uploads
cannot overshoot it together; while an upload streams, the floor (not the cap) guards the disk.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable, Generator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from PIL import Image

from inline_core.errors import (
    InlineError,
    InsufficientStorage,
    NotFound,
    PayloadTooLarge,
    UnsupportedMedia,
)
from inline_core.media import MediaKind, sniff
from inline_core.runtime.disk_space import MB, free_bytes, is_disk_full
from inline_core.server.stores.records import Asset, AssetRow
from inline_core.sizes import human_size
from inline_core.takes import MediaRef

if TYPE_CHECKING:  # the store imports this module's neighbours; only its type is needed here
    from inline_core.server.stores.run_store import RunStore

ASSET_ID = re.compile(r"sha256-[0-9a-f]{64}")
TAKE_ID = re.compile(r"tk_[0-9a-f]{1,64}")
SNIFF_BYTES = 64
DEFAULT_MAX_PIXELS = 8192 * 8192
# How often a streaming upload looks at the free space again (a statvfs call).
RECHECK_BYTES = 4 * MB


@dataclass(frozen=True)
class DiskBudget:
    """Limits on the disk the assets use: `min_free_bytes` left free on the disk, and at most
    `max_total_bytes` of stored assets (None: no cap of its own)."""

    min_free_bytes: int = 0
    max_total_bytes: int | None = None


def asset_row(asset: Asset) -> AssetRow:
    """What the run store keeps of an asset (its bytes stay in the assets folder)."""
    return AssetRow(asset.id, asset.kind.value, asset.content_type, asset.size, time.time())


@contextmanager
def upload_failures(cleanup: Callable[[], None] | None = None) -> Generator[None]:
    """Run `cleanup` (drop the partial upload) on any failure, and turn a full disk into the
    client-visible 507 instead of an unexpected error."""
    try:
        yield
    except BaseException as exc:
        if cleanup is not None:
            cleanup()
        if isinstance(exc, OSError) and is_disk_full(exc):
            raise InsufficientStorage("the data disk is full; the upload was not stored") from exc
        raise


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
    except (ValueError, OSError, RuntimeError):  # RuntimeError: a symlink loop
        return False
    return True


def allow_pixels(max_pixels: int) -> None:
    """Raise Pillow's own decompression-bomb threshold to `max_pixels` if it is lower (it warns
    above its threshold and refuses above twice it), so a limit the user raised is the one that
    applies. It is never lowered: our check refuses first."""
    current = Image.MAX_IMAGE_PIXELS
    if current is not None and current < max_pixels:
        Image.MAX_IMAGE_PIXELS = max_pixels


def check_image(path: Path, max_pixels: int, what: str, *, verify: bool = True) -> None:
    """Refuse an image Pillow cannot read (415) or one over `max_pixels` (413).

    Only the header is decoded for the size, and `verify` walks the file's structure without
    decoding pixels, so a decompression bomb is refused before it costs any memory.
    """
    try:
        with Image.open(path) as image:
            width, height = image.size
            if width * height > max_pixels:
                raise PayloadTooLarge(
                    f"{what} is {width}x{height} = {width * height} pixels; the limit is "
                    f"{max_pixels} (INLINE_MAX_IMAGE_PIXELS)"
                )
            if verify:
                image.verify()
    except InlineError:
        raise
    except Image.DecompressionBombError as exc:
        raise PayloadTooLarge(f"{what} has too many pixels: {exc}") from None
    except Exception as exc:  # Pillow raises many kinds of error on hostile bytes
        raise UnsupportedMedia(f"{what} is not a readable image ({type(exc).__name__})") from None


class AssetUpload:
    """One upload in progress: bytes are hashed and spilled to a temp file as they arrive, so
    memory stays flat and a body over the limit is refused as soon as it crosses it."""

    def __init__(self, store: AssetStore, expected_size: int | None = None) -> None:
        self._store = store
        store.check_room(expected_size or 0)
        with upload_failures():
            fd, tmp = tempfile.mkstemp(dir=store.root, prefix=".upload-")
        self._tmp = Path(tmp)
        self._file: BinaryIO = os.fdopen(fd, "wb")
        self._hash = hashlib.sha256()
        self._head = b""
        self._checked_at = 0  # `size` when the free space was last read
        self._reserved = 0  # bytes counted in the store's in-flight total
        self._over_cap = False  # some bytes did not fit under the assets cap
        self.size = 0

    def write(self, chunk: bytes) -> None:
        if self.size + len(chunk) > self._store.max_bytes:
            self.abort()
            raise PayloadTooLarge(
                f"upload is larger than the {human_size(self._store.max_bytes)} limit"
            )
        with upload_failures(self.abort):
            if not self._store.reserve(len(chunk)):
                self._over_cap = True
            self._reserved += len(chunk)
            if self.size + len(chunk) - self._checked_at >= RECHECK_BYTES:
                self._checked_at = self.size
                self._store.check_room(len(chunk))  # this upload's bytes so far are on disk
            if len(self._head) < SNIFF_BYTES:
                self._head += chunk[: SNIFF_BYTES - len(self._head)]
            self._hash.update(chunk)
            self._file.write(chunk)
        self.size += len(chunk)

    def finish(self) -> Asset:
        """Check the bytes are media, make the file durable and give it its content name."""
        with upload_failures(self.abort):
            if self.size == 0:
                raise UnsupportedMedia("the upload is empty")
            sniffed = sniff(self._head)
            if sniffed is None:
                raise UnsupportedMedia("the uploaded bytes are not an image, video or audio file")
            self._file.flush()
            if sniffed[0] == MediaKind.IMAGE:
                check_image(self._tmp, self._store.max_pixels, "the uploaded image")
            os.fsync(self._file.fileno())
            self._file.close()
            asset_id = "sha256-" + self._hash.hexdigest()
            final = self._store.root / asset_id
            known = final.exists()  # the same bytes again: the folder does not grow
            if self._over_cap and not known:
                raise self._store.cap_error(self.size)
            os.replace(self._tmp, final)
            _fsync_dir(self._store.root)
        self._store.settle(self._reserved, 0 if known else self.size)
        self._reserved = 0
        kind, content_type = sniffed
        return Asset(asset_id, kind, content_type, self.size, final)

    def abort(self) -> None:
        """Drop the upload (safe to call more than once)."""
        self._store.settle(self._reserved, 0)
        self._reserved = 0
        if not self._file.closed:
            try:
                self._file.close()
            except OSError:  # flushing onto a full disk; the file goes anyway
                pass
        self._tmp.unlink(missing_ok=True)


class AssetStore:
    def __init__(
        self,
        root: Path,
        max_bytes: int,
        max_pixels: int = DEFAULT_MAX_PIXELS,
        budget: DiskBudget | None = None,
    ) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self.max_pixels = max_pixels
        self.budget = budget or DiskBudget()
        allow_pixels(max_pixels)
        root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._in_flight = 0  # bytes of uploads not finished yet
        # Only a cap needs the folder's size: read once here, then kept up to date.
        self._stored = self._measure() if self.budget.max_total_bytes is not None else 0

    def _measure(self) -> int:
        total = 0
        for entry in os.scandir(self.root):
            if ASSET_ID.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
                total += entry.stat(follow_symlinks=False).st_size
        return total

    def stored_bytes(self) -> int:
        """Bytes of stored assets as the cap counts them (0 when there is no cap)."""
        with self._lock:
            return self._stored

    def check_room(self, incoming: int) -> None:
        """Refuse (507) if writing `incoming` more bytes would leave less than the floor free."""
        floor = self.budget.min_free_bytes
        if floor <= 0:
            return
        try:
            free = free_bytes(self.root)
        except OSError:
            return  # cannot tell; the write itself will say if the disk is full
        if free - incoming < floor:
            raise InsufficientStorage(
                f"not enough disk space for this upload: {human_size(free)} free on the data disk, "
                f"and {human_size(floor)} are kept free for takes and the run database "
                "(INLINE_MIN_FREE_DISK_MB)"
            )

    def reserve(self, incoming: int) -> bool:
        """Count `incoming` bytes of an upload in flight; whether they fit under the assets cap
        (the upload decides once it knows whether its bytes are new)."""
        cap = self.budget.max_total_bytes
        with self._lock:
            fits = cap is None or self._stored + self._in_flight + incoming <= cap
            self._in_flight += incoming
            return fits

    def cap_error(self, size: int) -> InsufficientStorage:
        cap = self.budget.max_total_bytes or 0
        with self._lock:
            stored = self._stored
        return InsufficientStorage(
            f"no room in the assets folder for this {human_size(size)} upload: "
            f"{human_size(stored)} are stored (with uploads in progress counted) and the cap is "
            f"{human_size(cap)} (INLINE_MAX_ASSETS_GB)"
        )

    def settle(self, reserved: int, stored: int) -> None:
        """An upload ended: release its `reserved` in-flight bytes, add what it `stored`."""
        with self._lock:
            self._in_flight -= reserved
            self._stored += stored

    def begin(self, expected_size: int | None = None) -> AssetUpload:
        """Start an upload; `expected_size` (a declared Content-Length) is checked against the
        free space before any byte is read."""
        return AssetUpload(self, expected_size if expected_size and expected_size > 0 else None)

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
        # By its name under this server's takes folder: the shared folder may be mounted
        # elsewhere on the server that wrote it, and a moved data dir keeps working.
        path = self.takes_root / Path(take.path).name
        if not path.name.startswith(take_id) or not inside(path, self.takes_root):
            raise NotFound(f"the file of take {take_id!r} is missing")
        if not path.is_file():
            raise NotFound(f"the file of take {take_id!r} is missing")
        return path

    def resolve(self, ref: MediaRef) -> Path:
        """The file behind `ref`; an image is checked against the pixel limit (which may have
        been lowered since it was stored) before any node opens it."""
        path = self.assets.path(ref.id) if ref.ref == "asset" else self.take_path(ref.id)
        with path.open("rb") as f:
            sniffed = sniff(f.read(SNIFF_BYTES))
        if sniffed is not None and sniffed[0] == MediaKind.IMAGE:
            # The file was verified when it was stored; here only its size matters.
            check_image(path, self.assets.max_pixels, f"{ref.ref} {ref.id!r}", verify=False)
        return path
