"""Giving freed heap memory back to the OS between runs.

A render allocates and frees many buffers on several threads; glibc keeps what is freed in its
per-thread arenas, so RSS creeps up run after run although nothing leaks (measured on the
built-in family's tiny kit model: about +4 MB per 100 renders, flat once trimmed).
`malloc_trim(0)` hands the free pages back (2-4 ms with a model resident), so the manager has it
called when the server goes idle (`HeapTrimmer`), and now and then while it stays busy. Where
there is no glibc (macOS, musl) this does nothing.

Settings applied once at start (`tune_malloc`):
- Arenas: glibc gives each new thread an arena of its own, up to 8 per core; with a server's dozens
  of threads the freed memory is spread over many arenas and RSS settles higher. Two arenas (what
  `MALLOC_ARENA_MAX=2` gives) measured about 40 MB less RSS under the 200-client load.
- Large blocks (`inline_core.heap_settings`): kept in the heap for reuse, up to 64 MB, instead of
  mapped and unmapped at every step. The server had a 4 MB threshold, chosen for RSS under the
  200-client load on the tiny kit model; with real-size weights that cost a seed-only render
  58,000 page faults, 4,800 with these (250 with the idle trim's delay, `HeapTrimmer`). The
  200-client load, both settings in one session (`bench/load_clients.py --seconds 40 --renders
  300`, a loaded machine): RSS 712 MB after 50 renders and 723 MB after 300 with these, 690 and
  718 MB with the old ones; 15.7 and 14.2 renders/s. What the heap keeps between runs is handed
  back by the trim above.
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

IDLE_DELAY_S = 10.0  # an idle server trims this long after its last run, unless another starts
BUSY_INTERVAL_S = 30.0  # a busy one trims at most this often (RSS creeps ~4 MB per 100 renders)


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
    """Trims when the server goes idle, `idle_delay_s` after its last run ended unless another
    starts first, and while busy at most once per `interval_s`. A trim hands back every free page,
    so the next render faults them in again: after each of a real-size model's seed-only renders
    that was 4,200 pages (about 17 MB, bench/real_size_cpu.py). So renders that follow each other
    within the delay (a user's edits) do not trim: such a render now faults 250 fresh pages, the
    same calls in a plain process 300."""

    def __init__(self, interval_s: float = BUSY_INTERVAL_S, idle_delay_s: float = IDLE_DELAY_S):
        self.interval_s = interval_s
        self.idle_delay_s = idle_delay_s
        self._trim = _malloc_trim()
        self._lock = threading.Lock()
        self._last = time.monotonic()  # the heap at start was settled by the collector
        self._pending: threading.Timer | None = None
        self.trims = 0

    @property
    def available(self) -> bool:
        return self._trim is not None

    def maybe_trim(self) -> bool:
        """While busy: trim unless the last trim was less than `interval_s` ago; True if it did."""
        with self._lock:
            if time.monotonic() - self._last < self.interval_s:
                return False
        return self.trim_now()

    def went_idle(self) -> None:
        """The last run ended and none waits: trim after the idle delay, unless `busy()` first."""
        if self._trim is None:
            return
        timer = threading.Timer(self.idle_delay_s, self.trim_now)
        timer.daemon = True
        timer.name = "heap-trim"
        with self._lock:
            if self._pending is not None:
                self._pending.cancel()
            self._pending = timer
        timer.start()

    def busy(self) -> None:
        """A run started: an idle trim still waiting is dropped."""
        with self._lock:
            pending, self._pending = self._pending, None
        if pending is not None:
            pending.cancel()

    def close(self) -> None:
        self.busy()

    def trim_now(self) -> bool:
        if self._trim is None:
            return False
        with self._lock:
            self._last = time.monotonic()
            self._pending = None
            self.trims += 1
        try:
            self._trim(0)
        except Exception:  # never let housekeeping end a worker
            log.exception("malloc_trim failed")
            return False
        return True
