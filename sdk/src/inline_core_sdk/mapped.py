"""Raw pixel files mapped once and kept mapped, in the worker.

The server rewrites a call's input files in place, call after call, so a mapping kept from the
last call already shows the new pixels; a fresh mapping page-faults every page in again (a
1024 px image: 0.6 ms of the transport). A file is remapped when it is another file or another
size than the one mapped. Only files up to `KEEP_BYTES` stay mapped: a kept mapping counts
towards the worker's memory limit.

(The server's images mostly come through the arena, `arena.py`; these are the ones that did not
fit, and files a node wrote itself.)
"""

from __future__ import annotations

import mmap
import os
import threading
from collections import OrderedDict
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

# Files kept mapped: a node's inputs (a fan-in port has several), most recently used first.
KEEP_FILES = 16
KEEP_BYTES = 16 * 1024 * 1024


@dataclass
class _Mapping:
    identity: tuple[int, int, int]  # device, inode, size
    mapped: mmap.mmap


def _identity(status: os.stat_result) -> tuple[int, int, int]:
    return status.st_dev, status.st_ino, status.st_size


class MappedFiles:
    def __init__(self, keep: int = KEEP_FILES) -> None:
        self._keep = keep
        self._maps: OrderedDict[str, _Mapping] = OrderedDict()
        self._lock = threading.Lock()

    @contextmanager
    def view(self, path: Path) -> Generator[memoryview]:
        """The file's bytes, read-only, valid inside the block (an empty file maps nothing)."""
        with self._lock:
            mapping = self._mapping(path)
            if mapping is None:
                yield memoryview(b"")
                return
            try:
                with memoryview(mapping.mapped) as pixels:
                    yield pixels
            finally:
                if str(path) not in self._maps:
                    mapping.mapped.close()  # too large to keep

    def _mapping(self, path: Path) -> _Mapping | None:
        key = str(path)
        kept = self._maps.get(key)
        if kept is not None and kept.identity == _identity(os.stat(path)):
            self._maps.move_to_end(key)
            return kept
        if kept is not None:
            del self._maps[key]
            kept.mapped.close()
        with path.open("rb") as f:
            identity = _identity(os.fstat(f.fileno()))
            if identity[2] == 0:
                return None
            mapping = _Mapping(identity, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
        if identity[2] > KEEP_BYTES:
            return mapping
        self._maps[key] = mapping
        while len(self._maps) > self._keep:
            _, oldest = self._maps.popitem(last=False)
            oldest.mapped.close()
        return mapping
