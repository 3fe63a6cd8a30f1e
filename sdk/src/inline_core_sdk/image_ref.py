"""`ImageRef`: an image (or mask) passed by reference, raw pixels rows top to bottom, laid out as
`mode` says ("RGB", "RGBA", or "L" for a mask).

The pixels are in a raw pixel file at `path`, or, for a call's input, in the arena's input half
(`arena.py`). Then the file is written only when a node asks for `path` (to hand it to a tool of
its own): pixels read with `to_pil`, `to_array` or `read_bytes` never touch a file.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from inline_core_sdk.arena import Region
from inline_core_sdk.errors import WireError
from inline_core_sdk.mapped import MappedFiles
from inline_core_sdk.packing import CHANNELS

# The worker's input files, mapped across calls (`mapped.py`). The server never maps a file a
# pack can write: a pack that truncated it would end the server with SIGBUS.
_MAPPED = MappedFiles()


def write_in_place(path: Path, data: bytes | memoryview) -> None:
    """Write `data` over the file's old bytes: a call's folder is reused, and rewriting pages
    a file already holds costs a fraction of allocating new ones (a 1024 px image: 1.2 ms).
    A symlink in its place is refused, not followed."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)


class ImageRef:
    """An image (or mask) as raw pixels; immutable, compared by what it names."""

    __slots__ = ("_path", "_width", "_height", "_mode", "_kind", "_shared")

    def __init__(self, path: Path, width: int, height: int, mode: str, kind: str = "image") -> None:
        self._path = path
        self._width = width
        self._height = height
        self._mode = mode
        self._kind = kind
        self._shared: tuple[Region, int] | None = None  # (the arena's input half, offset)

    @classmethod
    def in_arena(
        cls, region: Region, offset: int, path: Path, width: int, height: int, mode: str, kind: str
    ) -> ImageRef:
        """A call's input held in the arena; `path` is where its file goes if asked for."""
        ref = cls(path, width, height, mode, kind)
        ref._shared = (region, offset)
        return ref

    @property
    def path(self) -> Path:
        """The raw pixel file (written from the arena first, for an input held there)."""
        shared = self._shared
        if shared is not None:
            with shared[0].view(shared[1], self.size_bytes) as pixels:
                write_in_place(self._path, pixels)
            self._shared = None  # the file holds the pixels now
        return self._path

    @property
    def width(self) -> int:
        return self._width

    @property
    def height(self) -> int:
        return self._height

    @property
    def mode(self) -> str:
        return self._mode

    @property
    def kind(self) -> str:
        return self._kind

    @property
    def size_bytes(self) -> int:
        return self._width * self._height * CHANNELS[self._mode]

    def _names(self) -> tuple[Path, int, int, str, str]:
        return self._path, self._width, self._height, self._mode, self._kind

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ImageRef) and self._names() == other._names()

    def __hash__(self) -> int:
        return hash(self._names())

    def __repr__(self) -> str:
        return (
            f"ImageRef(path={self._path!r}, width={self._width}, height={self._height}, "
            f"mode={self._mode!r}, kind={self._kind!r})"
        )

    @contextmanager
    def pixels(self) -> Generator[memoryview]:
        """The raw pixels, read-only, valid inside the block (no copy: an input's file stays
        mapped from one call to the next, `mapped.py`)."""
        if self._shared is not None:
            region, offset = self._shared
            with region.view(offset, self.size_bytes) as pixels:
                yield pixels
            return
        with _MAPPED.view(self._path) as pixels:
            if len(pixels) != self.size_bytes or not pixels:
                raise WireError(
                    f"{self._path.name} holds {len(pixels)} bytes, not {self.size_bytes}"
                )
            yield pixels

    def read_bytes(self) -> bytes:
        with self.pixels() as pixels:
            return bytes(pixels)

    def to_pil(self) -> Any:
        """A Pillow image (the pack's own Pillow), decoded straight from the shared pixels."""
        from PIL import Image

        with self.pixels() as pixels:
            return Image.frombytes(self._mode, (self._width, self._height), pixels)

    def to_array(self) -> Any:
        """A numpy uint8 array, height x width (x channels unless a mask), the node's own."""
        import numpy as np

        with self.pixels() as pixels:
            flat = np.frombuffer(pixels, dtype=np.uint8).copy()
        channels = CHANNELS[self._mode]
        shape = (self._height, self._width)
        return flat.reshape(shape if channels == 1 else (*shape, channels))

    def to_wire(self) -> dict[str, Any]:
        return {
            "kind": self._kind,
            "path": str(self.path),
            "width": self._width,
            "height": self._height,
            "mode": self._mode,
        }
