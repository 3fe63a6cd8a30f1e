"""Giving freed heap memory back to the OS between runs.

A render allocates and frees many buffers on several threads; glibc keeps what is freed in its
per-thread arenas, so RSS creeps up run after run although nothing leaks (measured on the
built-in family's tiny kit model: about +4 MB per 100 renders, flat once trimmed).
`malloc_trim(0)` hands the free pages back (2-4 ms with a model resident), so the manager calls it
after a run, at most once per interval. Where there is no glibc (macOS, musl) this does nothing.

Settings applied once at start (`tune_malloc`):
- Arenas: glibc gives each new thread an arena of its own, up to 8 per core; with a server's dozens
  of threads the freed memory is spread over many arenas and RSS settles higher. Two arenas (what
  `MALLOC_ARENA_MAX=2` gives) measured about 40 MB less RSS under the 200-client load.
- Large blocks (`inline_core.heap_settings`): kept in the heap for reuse, up to 64 MB, instead of
  mapped and unmapped at every step. The server had a 4 MB threshold, chosen for RSS under the
  200-client load on the tiny kit model; with real-size weights that cost a seed-only render 58,000
  page faults, against 4,800 now. The 200-client load, both settings in one session
  (`bench/load_clients.py --seconds 40 --renders 300`, a loaded machine): RSS 712 MB after 50
  renders and 723 MB after 300 with these, 690 and 718 MB with the old ones; 15.7 and 14.2
  renders/s.
  What the heap keeps between runs is handed back by the trim above.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import threading
import time
from collections.abc import Callable

from inline_core.heap_settings import LARGE_BLOCK_MALLOC

log = logging.getLogger(__name__)

# mallopt parameter numbers, from glibc's malloc.h, with the values the server uses and the
# environment variable through which a user's own choice wins.
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
SERVER_MALLOC = (
    (M_ARENA_MAX, 2, "MALLOC_ARENA_MAX"),
    (M_MMAP_THRESHOLD, LARGE_BLOCK_MALLOC["MALLOC_MMAP_THRESHOLD_"], "MALLOC_MMAP_THRESHOLD_"),
    (M_TRIM_THRESHOLD, LARGE_BLOCK_MALLOC["MALLOC_TRIM_THRESHOLD_"], "MALLOC_TRIM_THRESHOLD_"),
)

IDLE_INTERVAL_S = 0.1  # several workers finishing together trim once


def _malloc_trim() -> Callable[[int], int] | None:
    libc = _libc()
    trim = getattr(libc, "malloc_trim", None) if libc is not None else None
    if trim is None:
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int

    def call(pad: int) -> int:
        return int(trim(pad))

    return call


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name)
    except OSError:
        return None


def tune_malloc() -> list[str]:
    """Apply the server's glibc malloc settings (module docstring); call before the server starts
    its threads. A setting the user gave in the environment wins. Returns what was applied."""
    libc = _libc()
    mallopt = getattr(libc, "mallopt", None) if libc is not None else None
    if mallopt is None:
        return []
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    applied: list[str] = []
    for parameter, value, variable in SERVER_MALLOC:
        if variable not in os.environ and int(mallopt(parameter, value)) == 1:
            applied.append(f"{variable}={value}")
    return applied


class HeapTrimmer:
    def __init__(self, interval_s: float = 1.0) -> None:
        self.interval_s = interval_s
        self._trim = _malloc_trim()
        self._lock = threading.Lock()
        self._last = -interval_s
        self.trims = 0

    @property
    def available(self) -> bool:
        return self._trim is not None

    def maybe_trim(self, idle: bool = False) -> bool:
        """Trim unless the last trim was less than `interval_s` ago (`IDLE_INTERVAL_S` when the
        queue has just emptied, so an idle server settles at what it keeps resident); True if it
        trimmed."""
        if self._trim is None:
            return False
        now = time.monotonic()
        with self._lock:
            if now - self._last < (IDLE_INTERVAL_S if idle else self.interval_s):
                return False
            self._last = now
            self.trims += 1
        try:
            self._trim(0)
        except Exception:  # never let housekeeping end a worker
            log.exception("malloc_trim failed")
            return False
        return True
