"""A pack worker's arena, made by the server (the arena itself: `inline_core_sdk.arena`).

It is a memfd sealed against shrinking and growing: the worker can write into it, but never cut
it short, so the server can keep it mapped for the worker's life, write inputs into it and decode
outputs straight from it (a mapping's access past a truncated file's end would be SIGBUS, and
would end the server). It holds nothing but the worker's own images. Its pages are allocated as
they are first written and count towards the worker's memory limit once it touches them. Where
memfds or seals are missing the worker gets no arena, and images go through raw pixel files.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import sys
from dataclasses import dataclass

from inline_core_sdk.arena import KEEP_BYTES, Arena

MB = 1024 * 1024
# Half for a call's input images, half for its image outputs: four 2048 px RGBA images each way.
ARENA_BYTES = 128 * MB


@dataclass
class MadeArena:
    arena: Arena
    fd: int | None  # the worker's copy, until it is started with it

    def handed_over(self) -> None:
        """The worker holds its own copy now: the server keeps only the mapping."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def close(self) -> None:
        self.handed_over()
        self.arena.close()


def make_arena(size: int = ARENA_BYTES, keep: int = KEEP_BYTES) -> MadeArena | None:
    """A new arena (each half keeping `keep` bytes allocated between calls), or None where this
    system cannot make one."""
    if sys.platform != "linux":
        return None
    try:
        fd = os.memfd_create("inline-pack-arena", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    except OSError:
        return None
    try:
        os.ftruncate(fd, size)
        seals = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
        mapped = mmap.mmap(fd, size)
    except OSError:
        os.close(fd)
        return None
    return MadeArena(Arena(mapped, keep), fd)
