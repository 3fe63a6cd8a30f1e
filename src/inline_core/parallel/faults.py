"""Which rank failed first, from evidence that is ordered rather than from the order of log lines.

Every time is `time.monotonic()`: CLOCK_MONOTONIC is one clock for all processes on the host, so a
rank's own stamp and the server's compare. Evidence, per rank, the earliest kept:
- a rank's report of a job error, stamped by the rank when it caught the error; the report also
  lists the peers the rank saw already gone or exiting at that moment. A rank whose error is the
  collateral of a peer's crash (a reset connection) therefore names that peer as earlier, however
  late the server's threads get to either event;
- what the server saw itself: a connection closed, a process gone, a heartbeat missed.
Ties go to the evidence recorded first, and a peer a report names comes before the report.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class RankFault:
    rank: int
    at: float
    order: int
    how: str  # "it closed its connection", "it reported an error", ...
    message: str | None = None  # the rank's own error, when it reported one

    @property
    def key(self) -> tuple[float, int]:
        return (self.at, self.order)


class FaultLog:
    """The current job's evidence (or, before any job, the group's); safe from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: dict[int, RankFault] = {}
        self._orders = itertools.count()

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def seen(self, rank: int, how: str) -> None:
        """The server saw `rank` fail now."""
        with self._lock:
            self._add(rank, time.monotonic(), how)

    def reported(self, rank: int, at: float, message: str, peers_down: Iterable[int]) -> None:
        """`rank` reported `message`, caught at `at`, when `peers_down` were already going."""
        with self._lock:
            for peer in peers_down:
                self._add(peer, at, f"it was gone when rank {rank} failed")
            self._add(rank, at, "it reported an error", message)

    def first(self) -> RankFault | None:
        with self._lock:
            return min(self._faults.values(), key=lambda f: f.key, default=None)

    def _add(self, rank: int, at: float, how: str, message: str | None = None) -> None:
        fault = RankFault(rank, at, next(self._orders), how, message)
        known = self._faults.get(rank)
        if known is not None:  # the earlier evidence, with whichever error the rank reported
            first, later = (fault, known) if fault.key < known.key else (known, fault)
            fault = replace(first, message=first.message or later.message)
        self._faults[rank] = fault
