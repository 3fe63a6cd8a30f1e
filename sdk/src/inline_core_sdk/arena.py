"""The arena: shared memory between the server and one worker for the pixels of a call's images.

The server creates it (a memfd sealed against shrinking, so neither side can cut it short under
the other's mapping: touching a mapping past a file's end is SIGBUS) and both keep it mapped for
the worker's life. Its first half holds a call's input images (the server writes, the worker
reads), its second half the call's image outputs (the worker writes, the server reads before it
sends the next call). Each half is filled from its start on every call. Copying into a mapping
kept for good costs a fraction of writing a file (no per-page work in the kernel, no page faults),
and nobody reads a file back. An image that does not fit goes through a raw pixel file instead.

A page is allocated when first written and then held by both sides (it counts in the worker's
resident memory), so what a large call used past `KEEP_BYTES` of a half is given back to the
system when the next call begins (the pages read as zeros again, and are allocated anew if
needed).
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Offsets are kept to cache lines, so two images never share one.
ALIGN = 64
# What a half keeps allocated between calls: a 2048 px RGBA image.
KEEP_BYTES = 16 * 1024 * 1024
_RELEASE = getattr(mmap, "MADV_REMOVE", None)  # frees a shared memory's pages (Linux)


class ArenaError(ValueError):
    """A reference to bytes the arena's half does not hold."""


@dataclass(frozen=True)
class ArenaImage:
    """An image's place in the arena, as the wire names it. An input's carries the path its raw
    pixel file is written to if a node asks for the file."""

    offset: int
    width: int
    height: int
    mode: str
    kind: str = "image"
    path: Path | None = None

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "arena": self.offset,
            "width": self.width,
            "height": self.height,
            "mode": self.mode,
        }
        if self.path is not None:
            out["path"] = str(self.path)
        return out


class Region:
    """One half of the arena: filled from its start, call after call."""

    def __init__(self, mapped: mmap.mmap, start: int, end: int, keep: int = KEEP_BYTES) -> None:
        self._mapped = mapped
        self.start = start
        self.end = end
        self._keep = keep
        self._next = start

    def begin_call(self) -> None:
        """A new call: whatever the last one left here has been read. What it used past the
        half's first `keep` bytes is given back."""
        page = mmap.PAGESIZE
        first = -(-(self.start + self._keep) // page) * page
        last = min(-(-self._next // page) * page, self.end // page * page)
        if _RELEASE is not None and last > first:
            try:
                self._mapped.madvise(_RELEASE, first, last - first)
            except OSError:
                pass  # the pages stay: they are reused by the next large call
        self._next = self.start

    def put(self, data: bytes) -> int | None:
        """Copy `data` in; its offset in the arena, or None if it does not fit."""
        offset = self._next
        end = offset + len(data)
        if end > self.end:
            return None
        self._mapped[offset:end] = data
        self._next = -(-end // ALIGN) * ALIGN
        return offset

    @contextmanager
    def view(self, offset: int, size: int) -> Generator[memoryview]:
        """`size` bytes at `offset`, valid inside the block."""
        if offset < self.start or offset + size > self.end or size <= 0:
            raise ArenaError(
                f"bytes {offset}..{offset + size} are outside the arena's {self.start}..{self.end}"
            )
        with memoryview(self._mapped) as whole, whole[offset : offset + size] as pixels:
            yield pixels


class Arena:
    def __init__(self, mapped: mmap.mmap, keep: int = KEEP_BYTES) -> None:
        self._mapped = mapped
        half = len(mapped) // 2 // mmap.PAGESIZE * mmap.PAGESIZE  # each half starts on a page
        self.inputs = Region(mapped, 0, half, keep)
        self.outputs = Region(mapped, half, len(mapped), keep)

    @classmethod
    def from_fd(cls, fd: int) -> Arena:
        """The worker's side: map the arena it inherited (the mapping holds the memory)."""
        try:
            return cls(mmap.mmap(fd, os.fstat(fd).st_size))
        finally:
            os.close(fd)

    def close(self) -> None:
        try:
            self._mapped.close()
        except BufferError:
            pass  # a call is still reading it (a server shutting down): it goes with the view
