"""Cooperative cancellation: a token checked at step boundaries, and inside a forward between its
blocks (`check_forward`)."""

from __future__ import annotations

import threading
from collections.abc import Generator, Sequence
from contextlib import contextmanager

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


# The cancel tokens of the rows of the forward running on this thread (the step loop sets them
# around each forward), so a check inside the model (between its blocks) can stop a forward
# whose every row was cancelled, instead of finishing a step nobody wants.
_forward = threading.local()


@contextmanager
def forward_rows(tokens: Sequence[CancelToken]) -> Generator[None]:
    """Within it, `check_forward` on this thread stops once every one of `tokens` is cancelled."""
    before: Sequence[CancelToken] = getattr(_forward, "tokens", ())
    _forward.tokens = tuple(tokens)
    try:
        yield
    finally:
        _forward.tokens = before


def check_forward() -> None:
    """Raise `Cancelled` when every row of this thread's forward is cancelled. Rows of other jobs
    sharing the forward are never cut short: a forward with one live row runs on (the loop drops
    the cancelled rows at the next step)."""
    tokens: Sequence[CancelToken] = getattr(_forward, "tokens", ())
    if tokens and all(token.cancelled for token in tokens):
        raise Cancelled(tokens[0].reason)
