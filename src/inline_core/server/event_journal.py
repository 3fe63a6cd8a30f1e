"""`EventJournal`: writes every running run's events to the store's history, in order.

One journal write is in flight at a time for all the runs of this server, and it takes every run's
buffered events when it runs, not when it is queued. Events that arrive meanwhile wait in their
run's buffer, where a node's newer progress takes its older progress's place (`CoalescedEvents`),
so the history keeps every milestone and the latest state of each node while the write rate
follows the database: runs ticking 20,000 times cost as many writes as the commits they overlap,
not 20,000, and any number of runs share each of those writes. Each run's part carries the state
its events lead to (`RunMirror`), so a snapshot read from the store is always consistent with the
history that follows it.

A run's last events ride with its terminal write (`drain`), queued after any journal write in
flight; a run that ends before the journal write runs costs that write nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future

from inline_core.server.events import WireEvent
from inline_core.server.live_run import LiveRun
from inline_core.server.stores.records import JournalEntry
from inline_core.server.stores.run_store import LeaseLost, RunStore


class EventJournal:
    def __init__(
        self,
        store: RunStore,
        lock: threading.RLock,
        on_failed: Callable[[LiveRun, BaseException], None],
    ) -> None:
        self._store = store
        self._lock = lock  # the manager's: it guards every LiveRun, and the fields below
        self._on_failed = on_failed
        self._waiting: dict[str, LiveRun] = {}  # runs with events the history does not have
        self._busy = False  # a journal write is queued or running

    def record(self, run: LiveRun, event: WireEvent) -> None:
        """Add `event` to `run`'s history (call with the lock held)."""
        if run.journal_closed:
            return
        run.journal.add(event)
        self._waiting[run.id] = run
        if not self._busy:
            self._write()

    def drain(self, run: LiveRun) -> list[WireEvent]:
        """The run's events not written yet, for its terminal write; no more are written after
        this (call with the lock held)."""
        run.journal_closed = True
        if self._waiting.get(run.id) is run:
            del self._waiting[run.id]
        return run.journal.take_all()

    def _write(self) -> None:
        self._busy = True
        taken: list[LiveRun] = []
        written = self._store.append_events_future(lambda: self._collect(taken))
        written.add_done_callback(lambda done: self._written(taken, done))

    def _collect(self, taken: list[LiveRun]) -> list[JournalEntry]:
        """What the write takes when it runs: every run's events buffered by then."""
        with self._lock:
            runs, self._waiting = list(self._waiting.values()), {}
            entries: list[JournalEntry] = []
            for run in runs:
                events = run.journal.take_all()
                if events:
                    taken.append(run)
                    entries.append(JournalEntry(run.lease, run.attempts, events, run.mirror()))
            return entries

    def _written(self, taken: list[LiveRun], done: Future[frozenset[str]]) -> None:
        error = done.exception()
        lost = frozenset[str]() if error is not None else done.result()
        with self._lock:
            self._busy = False
            if self._waiting:
                self._write()
        for run in taken:
            if error is not None:
                self._on_failed(run, error)
            elif run.id in lost:
                self._on_failed(run, LeaseLost(f"run {run.id} is no longer held by this server"))
