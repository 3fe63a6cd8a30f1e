"""Cooperative cancellation: a token checked at step boundaries."""

from __future__ import annotations

import threading

from inline_core.errors import Cancelled


class CancelToken:
    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason = "cancelled"

    def cancel(self, reason: str = "cancelled") -> None:
        self.reason = reason
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def raise_if_cancelled(self) -> None:
        if self._event.is_set():
            raise Cancelled(self.reason)

    def wait(self, timeout: float) -> bool:
        """Sleep up to `timeout` seconds; True if cancelled meanwhile."""
        return self._event.wait(timeout)
