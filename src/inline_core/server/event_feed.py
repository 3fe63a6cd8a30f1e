"""`EventFeed`: every websocket's events come from the store's history, whichever server runs the
run.

A watcher is a subscriber with a cursor: the seq of the last event it has (a snapshot's cursor to
begin with, so snapshot and deltas never overlap or leave a gap). When the store says a run's
history grew (a notice carrying its id: from this process's commits, or from another server's over
LISTEN/NOTIFY), the feed's thread reads what follows the lowest cursor of that run's watchers and
hands each watcher what is new to it, in order. A slow poll covers notices a reconnection may have
missed; a terminal event ends the watch.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from inline_core.errors import InlineError
from inline_core.server.events import Subscriber, WireEvent
from inline_core.server.stores.records import StoredEvent
from inline_core.server.stores.run_store import RunStore

log = logging.getLogger(__name__)

# Events read per round at most (a round that hits it goes again at once).
READ_LIMIT = 2000
# Every watched run is looked at this often even without a notice.
POLL_S = 5.0
# A notice payload meaning "any run may have new events" (after a reconnection).
EVERY_RUN = "*"


@dataclass(eq=False)
class _Watcher:
    subscriber: Subscriber
    cursor: int


def wire_event(stored: StoredEvent) -> WireEvent:
    node_id = stored.body.get("nodeId")
    return WireEvent(stored.type, stored.body, node_id if isinstance(node_id, str) else None)


class EventFeed:
    def __init__(self, store: RunStore, poll_s: float = POLL_S) -> None:
        self._store = store
        self._poll_s = poll_s
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._watchers: dict[str, list[_Watcher]] = {}
        self._woken: set[str] = set()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="event-feed", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def watch(self, run_id: str, subscriber: Subscriber, cursor: int) -> None:
        """Give `subscriber` the run's events after `cursor`, then every one that follows."""
        with self._wake:
            if self._closed:
                subscriber.close()
                return
            self._watchers.setdefault(run_id, []).append(_Watcher(subscriber, cursor))
            self._woken.add(run_id)  # events may have landed since the snapshot was read
            self._wake.notify()

    def unwatch(self, run_id: str, subscriber: Subscriber) -> None:
        with self._lock:
            watchers = self._watchers.get(run_id, [])
            watchers[:] = [w for w in watchers if w.subscriber is not subscriber]
            if not watchers:
                self._watchers.pop(run_id, None)

    def notice(self, run_id: str) -> None:
        """The store says `run_id`'s history grew (or EVERY_RUN: look at them all)."""
        with self._wake:
            if run_id == EVERY_RUN:
                self._woken.update(self._watchers)
            elif run_id in self._watchers:
                self._woken.add(run_id)
            else:
                return
            self._wake.notify()

    def watching(self) -> int:
        with self._lock:
            return sum(len(w) for w in self._watchers.values())

    def close(self) -> None:
        """End every stream after what it has (this server is stopping)."""
        with self._wake:
            self._closed = True
            watchers = [w for ws in self._watchers.values() for w in ws]
            self._watchers.clear()
            self._wake.notify()
        for watcher in watchers:
            watcher.subscriber.close()
        if self._thread.is_alive():
            self._thread.join(timeout=5.0)

    def _loop(self) -> None:
        while True:
            with self._wake:
                if not self._woken and not self._closed:
                    self._wake.wait(self._poll_s)
                if self._closed:
                    return
                runs = self._woken or set(self._watchers)
                self._woken = set()
                cursors = {
                    run_id: min(w.cursor for w in self._watchers[run_id])
                    for run_id in runs
                    if self._watchers.get(run_id)
                }
            if cursors:
                self._deliver(cursors)

    def _deliver(self, cursors: dict[str, int]) -> None:
        for run_id, cursor in cursors.items():
            try:
                events = self._store.events_after(run_id, cursor, READ_LIMIT)
            except InlineError as exc:  # the database is unreachable: the next round tries again
                log.debug("event feed: %s", exc.message)
                return
            except Exception:
                log.exception("event feed: reading the history of run %s failed", run_id)
                continue
            self._hand_out(run_id, events)

    def _hand_out(self, run_id: str, events: list[StoredEvent]) -> None:
        with self._wake:
            if len(events) >= READ_LIMIT:
                self._woken.add(run_id)  # there is more: read on at once
            watchers = self._watchers.get(run_id, [])
            for stored in events:
                wire = wire_event(stored)
                for watcher in watchers:
                    if stored.seq > watcher.cursor:
                        watcher.subscriber.publish(wire)
                        watcher.cursor = stored.seq
                if wire.terminal:  # every stream of the run ended with it
                    self._watchers.pop(run_id, None)
                    return
            remaining = [w for w in watchers if not w.subscriber.closed]
            if remaining:
                self._watchers[run_id] = remaining
            else:
                self._watchers.pop(run_id, None)
