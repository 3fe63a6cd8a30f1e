"""`EventJournal`: writes each running run's events to the store's history, in order.

At most one write per run is in flight, and it takes the run's buffered events when it runs, not
when it is queued. Events that arrive meanwhile wait in the run's buffer,
where a node's newer progress takes its older progress's place (`CoalescedEvents`), so the history
keeps every milestone and the latest state of each node while the write rate follows the database:
a run ticking 20,000 times costs as many writes as the commits it overlaps, not 20,000. Each write
carries the state the events lead to (`RunMirror`), so a snapshot read from the store is always
consistent with the history that follows it.

The run's last events ride with its terminal write (`drain`), queued after any write in flight.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future

from inline_core.server.events import WireEvent
from inline_core.server.live_run import LiveRun
from inline_core.server.stores.records import RunMirror
from inline_core.server.stores.run_store import RunStore


class EventJournal:
    def __init__(
        self,
        store: RunStore,
        lock: threading.RLock,
        on_failed: Callable[[LiveRun, BaseException], None],
    ) -> None:
        self._store = store
        self._lock = lock  # the manager's: it guards every LiveRun
        self._on_failed = on_failed

    def record(self, run: LiveRun, event: WireEvent) -> None:
        """Add `event` to `run`'s history (call with the lock held)."""
        if run.journal_closed:
            return
        run.journal.add(event)
        if not run.journal_busy:
            self._write(run)

    def drain(self, run: LiveRun) -> list[WireEvent]:
        """The run's events not written yet, for its terminal write; no more are written after
        this (call with the lock held)."""
        run.journal_closed = True
        return run.journal.take_all()

    def _write(self, run: LiveRun) -> None:
        if not run.journal:
            return
        run.journal_busy = True
        written = self._store.append_events_future(
            run.lease, run.attempts, lambda: self._collect(run)
        )
        written.add_done_callback(lambda done: self._written(run, done))

    def _collect(self, run: LiveRun) -> tuple[list[WireEvent], RunMirror]:
        """What the write takes when it runs: everything buffered by then (none if the terminal
        write took it first)."""
        with self._lock:
            return run.journal.take_all(), run.mirror()

    def _written(self, run: LiveRun, done: Future[int]) -> None:
        error = done.exception()
        with self._lock:
            run.journal_busy = False
            if error is None and not run.journal_closed:
                self._write(run)
        if error is not None:
            self._on_failed(run, error)
