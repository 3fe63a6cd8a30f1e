"""`Claimer`: one thread that claims queued runs for this server whenever it may have room.

It is woken by a submission here, by a notice that runs are queued (from another server too), by a
run ending here (a worker freed), and at least every `poll_s`, which is also how often a shared
store is swept for leases that expired. Each round is one write (`claim`), and a round that filled
every free worker goes again at once: more may be waiting.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class Claimer:
    def __init__(self, claim_round: Callable[[], bool], poll_s: float) -> None:
        """`claim_round` claims what it can; it returns True when another round should follow
        at once."""
        self._claim_round = claim_round
        self._poll_s = poll_s
        self._woken = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="run-claimer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        self._woken.set()

    def close(self) -> None:
        self._stop.set()
        self._woken.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10.0)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._woken.wait(self._poll_s)
            self._woken.clear()
            if self._stop.is_set():
                return
            try:
                while self._claim_round() and not self._stop.is_set():
                    pass
            except Exception:  # a claim that failed is tried again at the next wake or poll
                log.exception("claiming runs failed")
