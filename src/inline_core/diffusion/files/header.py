"""Read a `.safetensors` file's header (tensor names, shapes, dtypes) without torch.

The header is a little-endian u64 length followed by that many bytes of JSON, so a 12 GB checkpoint
is identified and its architecture inferred by reading a few hundred kilobytes.
"""

from __future__ import annotations

import json
import os
import struct
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from inline_core.errors import RunFailed

# A header larger than this is not a real safetensors header (the format caps it at 100 MB).
MAX_HEADER_BYTES = 100 * 1024 * 1024


class HeaderError(RunFailed):
    """The file is not a readable safetensors checkpoint."""


@dataclass(frozen=True)
class TensorInfo:
    dtype: str
    shape: tuple[int, ...]


def read_header(path: Path) -> dict[str, TensorInfo]:
    """Tensor name -> (dtype, shape). Raises `HeaderError` naming the file when it is unreadable."""
    out: dict[str, TensorInfo] = {}
    for name, meta in _raw_header(path).items():
        if name == "__metadata__":
            continue
        if not isinstance(meta, dict):
            raise HeaderError(f"{path}: malformed entry for tensor {name!r}")
        entry = cast(dict[str, Any], meta)
        shape = entry.get("shape")
        dtype = entry.get("dtype")
        if not isinstance(shape, list) or not isinstance(dtype, str):
            raise HeaderError(f"{path}: malformed entry for tensor {name!r}")
        out[name] = TensorInfo(dtype, tuple(int(d) for d in cast(list[Any], shape)))
    return out


def read_metadata(path: Path) -> dict[str, str]:
    """The header's `__metadata__` (string to string; empty when it has none). Raises
    `HeaderError` as `read_header` does."""
    meta = _raw_header(path).get("__metadata__")
    if not isinstance(meta, dict):
        return {}
    return {str(k): v for k, v in cast(dict[Any, Any], meta).items() if isinstance(v, str)}


def _raw_header(path: Path) -> dict[str, Any]:
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(8)
            if len(head) != 8:
                raise HeaderError(f"{path}: too short to be a safetensors file")
            (length,) = struct.unpack("<Q", head)
            if length <= 0 or length > MAX_HEADER_BYTES or length + 8 > size:
                raise HeaderError(f"{path}: not a safetensors file (bad header length {length})")
            raw = f.read(length)
    except OSError as exc:
        raise HeaderError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    try:
        parsed: object = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HeaderError(f"{path}: not a safetensors file (header is not JSON)") from exc
    if not isinstance(parsed, dict):
        raise HeaderError(f"{path}: not a safetensors file (header is not an object)")
    return cast(dict[str, Any], parsed)


class HeaderCache:
    """Headers keyed by (path, size, mtime), so repeated submits do not re-read files."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, int, int], dict[str, TensorInfo]] = {}

    def get(self, path: Path) -> dict[str, TensorInfo]:
        st = os.stat(path)
        key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None:
            return hit
        header = read_header(path)
        with self._lock:
            self._cache[key] = header
        return header


HEADERS = HeaderCache()


def read_view(path: Path, view: str | None = None) -> dict[str, TensorInfo]:
    """A file's header, or a view's: the tensors under the prefix `view`, the prefix cut (an
    all-in-one checkpoint's part, `checkpoint.py`). Raises `HeaderError` as `read_header` does,
    and when the view holds nothing."""
    header = HEADERS.get(path)
    if not view:
        return header
    part = {k[len(view) :]: v for k, v in header.items() if k.startswith(view)}
    if not part:
        raise HeaderError(f"{path}: no tensors under {view!r}")
    return part
