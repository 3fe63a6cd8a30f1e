"""What a job waiting on the step loop is waiting for, and roughly how long.

The loop runs one forward at a time. A job that arrives during another render's forward, or that
sits out a step while another group is forwarded, is told so (`SampleJob.on_wait`) with the time
that forward is expected to take (the last forward of the same batch key), so its run says why it
has not moved instead of looking stuck. A forward expected to take under `NOTICE_S` goes unsaid,
as does a model's first (nothing to go by yet).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Generator, Hashable, Sequence
from contextlib import contextmanager

from inline_core.sampling.ticket import Ticket

NOTICE_S = 1.0
WAITING_FOR = "another render's step on this device (it runs one forward at a time)"


class ForwardWatch:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._took: dict[Hashable, float] = {}  # batch key -> its last forward's seconds
        self._now: tuple[float, float | None] | None = None  # (started, expected s) in progress

    def waiting(self, tickets: Sequence[Ticket], group: Sequence[Ticket]) -> None:
        """`tickets` sit out the forward of `group` about to begin."""
        expected = self._took.get(group[0].key)
        for ticket in tickets:
            _tell(ticket, expected)

    @contextmanager
    def forward(self, group: Sequence[Ticket]) -> Generator[None]:
        """Around one forward of `group`: jobs arriving meanwhile are told how long it has left."""
        started = time.monotonic()
        with self._lock:
            self._now = (started, self._took.get(group[0].key))
        try:
            yield
            self._took[group[0].key] = time.monotonic() - started
        finally:
            with self._lock:
                self._now = None

    def arrived(self, ticket: Ticket) -> None:
        """A job handed to the loop (from any thread): told if a forward holds the loop now."""
        with self._lock:
            now = self._now
        if now is None:
            return
        started, expected = now
        left = None if expected is None else max(0.0, expected - (time.monotonic() - started))
        _tell(ticket, left)


def _tell(ticket: Ticket, left_s: float | None) -> None:
    if left_s is None or left_s < NOTICE_S:
        return
    try:
        ticket.job.on_wait(WAITING_FOR, left_s)
    except Exception:  # a report never fails a job
        return
