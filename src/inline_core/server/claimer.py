"""`Claimer`: claims queued runs for this server whenever it may have room.

It is woken by a submission here, by a notice that runs are queued (from another server too), by a
run ending here (a worker freed), and at least every `poll_s`, which is also how often a shared
store is swept for leases that expired. A wake queues one claim (one write) unless a claim is
already waiting in the store's queue: a claim is sized when the writer runs it, not when it is
queued, so every worker freed meanwhile goes into it, however many wakes there were.

Nothing waits for a claim's commit: its runs are handed over from the writer's thread once it is
durable, and a claim that filled the room it had goes again at once (more may be waiting). So runs
that take no time start as fast as the writer commits, not one claim's round trip per few runs.
The room a claim took stays reserved until its runs are handed over.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

from inline_core.errors import InlineError
from inline_core.server.stores.records import Claimed, ClaimRequest
from inline_core.server.stores.run_store import RunStore

log = logging.getLogger(__name__)


@dataclass(eq=False)
class _Claim:
    reserved: int = 0  # the room it took when it ran
    # time.monotonic() when it was sized: before the database set any of its leases' expiry.
    made_at: float = 0.0


class Claimer:
    def __init__(
        self,
        store: RunStore,
        request: Callable[[int], ClaimRequest | None],
        admit: Callable[[Claimed, float], None],
        poll_s: float,
        on_poll: Callable[[], None] = lambda: None,
    ) -> None:
        """`request(reserved)`: the claim to make now, given the room that claims not handed
        over yet hold (None: nothing to claim); it runs on the store's writer thread, one claim
        at a time, so it must not wait on anything. `admit(claimed, made_at)`: hand the claimed
        runs over. `on_poll`: called on the claimer's own thread before each poll's claim (and at
        once after a `poke`)."""
        self._store = store
        self._request = request
        self._admit = admit
        self._poll_s = poll_s
        self._on_poll = on_poll
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)  # a claim's runs were handed over
        self._waiting: _Claim | None = None  # queued, not sized yet
        self._in_flight = 0  # claims queued whose runs are not handed over yet
        self._reserved = 0
        self._closed = False
        self._stop = threading.Event()
        self._poked = threading.Event()  # poll now: `on_poll` has something new to look at
        self._thread = threading.Thread(target=self._poll, name="run-claimer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> bool:
        """Claim what there is room for (never blocks: the claim is queued to the writer).
        False when no claim was queued (one is waiting already, or claiming has stopped)."""
        with self._lock:
            if self._closed or self._waiting is not None:
                return False  # the claim waiting will take the room this wake is about
            claim = self._waiting = _Claim()
            self._in_flight += 1
        future = self._store.claim_future(lambda: self._size(claim))
        future.add_done_callback(lambda done: self._done(claim, done))
        return True

    def close(self, timeout: float = 10.0) -> None:
        """Claim no more; wait until the claims in flight have handed their runs over (not
        just committed: a run handed over after this returns would have no worker left)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            self._closed = True
        self._stop.set()
        self._poked.set()
        if self._thread.is_alive():
            self._thread.join(timeout=timeout)
        with self._settled:
            while self._in_flight > 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    log.warning("%d claims still in flight as claiming stopped", self._in_flight)
                    return
                self._settled.wait(left)

    def poke(self) -> None:
        """Poll now rather than at the next interval (never blocks: the poll runs on the
        claimer's own thread)."""
        self._poked.set()

    def _poll(self) -> None:
        while True:
            self._poked.wait(self._poll_s)
            self._poked.clear()
            if self._stop.is_set():
                return
            try:
                self._on_poll()
            except Exception:
                log.exception("the claimer's poll hook failed")
            self.wake()

    def _size(self, claim: _Claim) -> ClaimRequest | None:
        """On the writer's thread, when the claim runs: how much to claim."""
        with self._lock:
            if self._waiting is claim:
                self._waiting = None  # from now on a wake queues another claim
            reserved = self._reserved
        claim.made_at = time.monotonic()
        request = self._request(reserved)
        if request is not None and request.limit > 0:
            claim.reserved = request.limit
            with self._lock:
                self._reserved += request.limit
        return request

    def _done(self, claim: _Claim, done: Future[Claimed | None]) -> None:
        with self._lock:
            if self._waiting is claim:
                self._waiting = None  # refused before it ran (the database is unreachable)
        error = done.exception()
        claimed = None if error is not None else done.result()
        try:
            if claimed is not None:
                self._admit(claimed, claim.made_at)
        finally:
            with self._settled:  # only now: the runs admitted hold their workers themselves
                self._reserved -= claim.reserved
                self._in_flight -= 1
                self._settled.notify_all()
        if isinstance(error, InlineError):  # unreachable: the next wake or poll tries again
            log.debug("claiming runs failed: %s", error.message)
        elif error is not None:
            log.error("claiming runs failed", exc_info=error)
        elif claimed is not None and claim.reserved > 0 and len(claimed.runs) == claim.reserved:
            self.wake()
