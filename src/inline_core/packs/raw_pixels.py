"""A pack's raw pixel outputs read into the server, into a buffer the server owns.

Never a mapping of the pack's file: the pack can still truncate it, and touching a mapping past a
truncated file's end is SIGBUS, which would end the server. And not a fresh buffer per call: one
is page-faulted in page by page (3 MiB at 1024 px), so one buffer is kept and reused.
"""

from __future__ import annotations

import os
from pathlib import Path

from PIL import Image

from inline_core_sdk.media import CHANNELS

# The largest buffer kept between calls (a 2048 px RGBA image); a larger image gets its own.
KEEP_BYTES = 16 * 1024 * 1024


class RawPixelsError(ValueError):
    """The file does not hold the pixels its reference says it does."""


class RawPixelReader:
    """One per pack worker: its calls run one at a time, so one buffer serves them all."""

    def __init__(self, keep_bytes: int = KEEP_BYTES) -> None:
        self._keep_bytes = keep_bytes
        self._buffer = bytearray()

    def _buffer_for(self, size: int) -> bytearray:
        if size <= len(self._buffer):
            return self._buffer
        buffer = bytearray(size)
        if size <= self._keep_bytes:
            self._buffer = buffer
        return buffer

    def image(self, path: Path, width: int, height: int, mode: str) -> Image.Image:
        size = width * height * CHANNELS[mode]
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            held = os.fstat(fd).st_size
            if held != size:
                raise RawPixelsError(f"{path.name} holds {held} bytes, not {size}")
            with memoryview(self._buffer_for(size))[:size] as pixels:
                read = 0
                while read < size:
                    got = os.readv(fd, [pixels[read:]])
                    if got == 0:
                        raise RawPixelsError(f"{path.name} was cut short while being read")
                    read += got
                return Image.frombytes(mode, (width, height), pixels)
        finally:
            os.close(fd)
