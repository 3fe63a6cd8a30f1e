"""`EventJournal`: writes every running run's events to the store's history, in order.

One journal write is in flight at a time for all the runs of this server, and it takes every run's
buffered events when it runs, not when it is queued. Events that arrive meanwhile wait in their
run's buffer, where a node's newer progress takes its older progress's place (`CoalescedEvents`),
so the history keeps every milestone and the latest state of each node while the write rate
follows the database: runs ticking 20,000 times cost as many writes as the commits they overlap,
not 20,000, and any number of runs share each of those writes. Each run's part carries the state
its events lead to (`RunMirror`), so a snapshot read from the store is always consistent with the
history that follows it.

A write that would carry progress ticks alone waits until `PROGRESS_INTERVAL_S` after the one
before it began: a progress bar needs no more, and a fast model's steps (a tiny one ticks every
few milliseconds) would otherwise keep the writer, the feed and a core busy for the whole run,
next to the model's own threads. Any other event (a node done, an error) is written at once.
Journal writes are not durable commits (`append_events_future`): the terminal write is.

A run's last events ride with its terminal write (`drain`), queued after any journal write in
flight; a run that ends before the journal write runs costs that write nothing.

With `lease_s`, a journal write extends the lease of every run it writes for, as a heartbeat
would (it is fenced by the lease like every write of a held run), and `on_extended` hears when
it was sent: a server whose runs make progress keeps them even while its lease keeper's own
renewals come late, and one that makes none (frozen, stopped) loses them when they expire.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

from inline_core.server.events import WireEvent
from inline_core.server.live_run import LiveRun
from inline_core.server.stores.records import JournalEntry
from inline_core.server.stores.run_store import LeaseLost, RunStore

# Progress alone is written at most this often (a newer tick replaces an older one meanwhile).
PROGRESS_INTERVAL_S = 0.05


class EventJournal:
    def __init__(
        self,
        store: RunStore,
        lock: threading.RLock,
        on_failed: Callable[[LiveRun, BaseException], None],
        progress_interval_s: float = PROGRESS_INTERVAL_S,
        *,
        lease_s: float | None = None,
        on_extended: Callable[[LiveRun, float], None] = lambda _run, _sent: None,
    ) -> None:
        self._store = store
        self._lock = lock  # the manager's: it guards every LiveRun, and the fields below
        self._on_failed = on_failed
        self._interval_s = progress_interval_s
        self._lease_s = lease_s
        self._on_extended = on_extended  # (run, time.monotonic() before the write was sent)
        self._waiting: dict[str, LiveRun] = {}  # runs with events the history does not have
        self._busy = False  # a journal write is queued or running
        self._milestone = False  # something other than progress is waiting
        self._last_write = float("-inf")  # time.monotonic() when the last write was queued
        self._timer: threading.Timer | None = None  # a paced write, due later
        self._closed = False

    def record(self, run: LiveRun, event: WireEvent) -> None:
        """Add `event` to `run`'s history (call with the lock held)."""
        if run.journal_closed:
            return
        run.journal.add(event)
        self._waiting[run.id] = run
        if event.type != "progress":
            self._milestone = True
        if not self._busy:
            self._schedule()

    def close(self) -> None:
        """Write no more (the server is stopping: its runs' ends are already queued)."""
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def drain(self, run: LiveRun) -> list[WireEvent]:
        """The run's events not written yet, for its terminal write; no more are written after
        this (call with the lock held)."""
        run.journal_closed = True
        if self._waiting.get(run.id) is run:
            del self._waiting[run.id]
        return run.journal.take_all()

    def _schedule(self) -> None:
        """Write now, or, for progress alone, once the interval since the last write has passed
        (lock held, no write in flight)."""
        if self._closed or not self._waiting:
            return
        due = self._last_write + self._interval_s - time.monotonic()
        if self._milestone or due <= 0:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._write()
        elif self._timer is None:
            self._timer = threading.Timer(due, self._paced)
            self._timer.daemon = True
            self._timer.start()

    def _paced(self) -> None:
        with self._lock:
            self._timer = None
            if not self._busy:
                self._schedule()

    def _write(self) -> None:
        self._busy = True
        self._milestone = False  # the write takes whatever is waiting when it runs
        self._last_write = time.monotonic()
        taken: list[LiveRun] = []
        sent: list[float] = []
        written = self._store.append_events_future(
            lambda: self._collect(taken, sent), lease_s=self._lease_s
        )
        written.add_done_callback(lambda done: self._written(taken, sent, done))

    def _collect(self, taken: list[LiveRun], sent: list[float]) -> list[JournalEntry]:
        """What the write takes when it runs: every run's events buffered by then."""
        sent.append(time.monotonic())  # before any of its statements leaves this server
        with self._lock:
            runs, self._waiting = list(self._waiting.values()), {}
            entries: list[JournalEntry] = []
            for run in runs:
                events = run.journal.take_all()
                if events:
                    taken.append(run)
                    entries.append(JournalEntry(run.lease, run.attempts, events, run.mirror()))
            return entries

    def _written(
        self, taken: list[LiveRun], sent: list[float], done: Future[frozenset[str]]
    ) -> None:
        error = done.exception()
        lost = frozenset[str]() if error is not None else done.result()
        with self._lock:
            self._busy = False
            self._schedule()
        for run in taken:
            if error is not None:
                self._on_failed(run, error)
            elif run.id in lost:
                self._on_failed(run, LeaseLost(f"run {run.id} is no longer held by this server"))
            elif self._lease_s is not None:
                self._on_extended(run, sent[0])
