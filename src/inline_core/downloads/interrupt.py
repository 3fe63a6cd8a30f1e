"""How a running transfer is stopped from another thread: `Stopped` (the server is shutting down:
keep the partial file) and `Interrupt` (wake a read blocked on a stalled connection)."""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Any


class Stopped(Exception):
    """The manager is shutting down: the partial file is kept, the download resumes next start."""


class Interrupt:
    """Wakes a transfer blocked on a stalled connection (a cancel must not wait for the next
    byte): `fire` shuts the stream's socket down, so the read in progress fails at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._socket: socket.socket | None = None
        self._fired = False

    def watch(self, response: Any) -> None:
        stream = response.extensions.get("network_stream")
        sock = None if stream is None else stream.get_extra_info("socket")
        with self._lock:
            self._socket = sock if isinstance(sock, socket.socket) else None
            if self._fired:
                self._shutdown()

    def fire(self) -> None:
        with self._lock:
            self._fired = True
            self._shutdown()

    def _shutdown(self) -> None:
        if self._socket is not None:
            with contextlib.suppress(OSError):
                self._socket.shutdown(socket.SHUT_RDWR)
