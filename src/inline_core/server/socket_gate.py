"""Caps on open `/v1/runs/{id}/events` sockets: in all, and per run.

Each socket holds a file descriptor and a small event buffer, so a client (or a buggy app) that
opens thousands could exhaust the process's descriptors or memory; past a cap the handshake is
refused (see server/websocket.py). The total is also kept under the process's open-file limit,
leaving descriptors for HTTP requests, take files and the database.
"""

from __future__ import annotations

import logging
import threading

from inline_core.errors import Busy

log = logging.getLogger(__name__)

# Descriptors kept for everything that is not an event socket.
RESERVED_FDS = 256
RETRY_AFTER_S = 5
MAX_ID_IN_MESSAGE = 80


def open_file_limit() -> int | None:
    """The soft RLIMIT_NOFILE, or None where there is none (Windows) or it is unlimited."""
    try:
        import resource
    except ImportError:
        return None
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else soft


def effective_total(configured: int, fd_limit: int | None) -> int:
    """`configured`, lowered to fit under `fd_limit` with `RESERVED_FDS` to spare (at least 1)."""
    if fd_limit is None:
        return configured
    return max(1, min(configured, fd_limit - RESERVED_FDS))


class SocketGate:
    def __init__(self, max_total: int, max_per_run: int, fd_limit: int | None = None) -> None:
        self.max_total = effective_total(max_total, fd_limit)
        self.max_per_run = max_per_run
        if self.max_total < max_total:
            log.warning(
                "at most %d event websockets (INLINE_MAX_WEBSOCKETS=%d does not fit under the "
                "open-file limit %s; raise `ulimit -n` for more)",
                self.max_total,
                max_total,
                fd_limit,
            )
        self._lock = threading.Lock()
        self._per_run: dict[str, int] = {}  # only runs with a socket open: bounded by the total
        self._total = 0

    def acquire(self, run_id: str) -> None:
        """Count one more socket on `run_id`, or raise `Busy` (429) past either cap."""
        with self._lock:
            if self._total >= self.max_total:
                raise Busy(
                    f"too many event websockets are open ({self.max_total}, "
                    "INLINE_MAX_WEBSOCKETS); close some and retry",
                    retry_after_s=RETRY_AFTER_S,
                )
            on_run = self._per_run.get(run_id, 0)
            if on_run >= self.max_per_run:
                raise Busy(
                    f"too many event websockets are open on run {run_id[:MAX_ID_IN_MESSAGE]!r} "
                    f"({self.max_per_run}, INLINE_MAX_WEBSOCKETS_PER_RUN); close some and retry",
                    retry_after_s=RETRY_AFTER_S,
                )
            self._per_run[run_id] = on_run + 1
            self._total += 1

    def release(self, run_id: str) -> None:
        with self._lock:
            on_run = self._per_run.get(run_id, 0)
            if on_run <= 0:
                return
            if on_run == 1:
                del self._per_run[run_id]
            else:
                self._per_run[run_id] = on_run - 1
            self._total -= 1

    def open_count(self, run_id: str | None = None) -> int:
        with self._lock:
            return self._total if run_id is None else self._per_run.get(run_id, 0)
