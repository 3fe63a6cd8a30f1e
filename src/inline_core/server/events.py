"""Event fan-out: one `Subscriber` per websocket, fed by the event feed's thread (from the stored
history), read from asyncio.

A subscriber's buffer is bounded by the graph, not by the run's length: progress is coalesced per
node and phase (a newer tick replaces an undelivered older one of its phase in place, so order is
kept), while run_started, node_done and the terminal event are always kept. A client that stops
reading therefore costs at most a few events per node, and a worker publishing never waits on a
socket.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

# A download's events end the same way, with `download_done` for its success.
TERMINAL_EVENTS = frozenset({"run_done", "download_done", "error", "cancelled"})


@dataclass
class WireEvent:
    """One websocket message: its `type`, the node it is about (if any) and its JSON body."""

    type: str
    body: dict[str, Any]
    node_id: str | None = None
    _text: str | None = field(default=None, repr=False)

    @property
    def terminal(self) -> bool:
        return self.type in TERMINAL_EVENTS

    def text(self) -> str:
        # Encoded once, however many subscribers send it.
        if self._text is None:
            self._text = json.dumps(self.body, separators=(",", ":"))
        return self._text


@dataclass
class _Slot:
    event: WireEvent


class CoalescedEvents:
    """An ordered buffer in which a node's newer progress takes the place of its older progress
    of the same phase that is still waiting, so order is kept and the buffer is bounded by the
    graph: a few events per node, however long the run. Each phase keeps its own latest tick, so a
    fast node (every sample step inside one journal interval, or a reader that lags) still shows
    how far its sampling went before its decode, not only the decode.
    Not thread-safe: its owner locks around it."""

    def __init__(self) -> None:
        self._slots: deque[_Slot] = deque()
        self._progress: dict[tuple[str, object], _Slot] = {}
        self.coalesced = 0  # progress events replaced before they were taken

    def __len__(self) -> int:
        return len(self._slots)

    def add(self, event: WireEvent) -> None:
        if event.type == "progress" and event.node_id is not None:
            key = _progress_key(event)
            waiting = self._progress.get(key)
            if waiting is not None:
                waiting.event = event  # the newer tick, in the older one's place
                self.coalesced += 1
                return
            slot = _Slot(event)
            self._progress[key] = slot
            self._slots.append(slot)
            return
        self._slots.append(_Slot(event))

    def pop(self) -> WireEvent:
        slot = self._slots.popleft()
        if slot.event.type == "progress" and slot.event.node_id is not None:
            key = _progress_key(slot.event)
            if self._progress.get(key) is slot:
                del self._progress[key]
        return slot.event

    def take_all(self) -> list[WireEvent]:
        taken = [slot.event for slot in self._slots]
        self._slots.clear()
        self._progress.clear()
        return taken


def _progress_key(event: WireEvent) -> tuple[str, object]:
    assert event.node_id is not None
    return event.node_id, event.body.get("phase")


class LoopWake:
    """Wakes one asyncio reader from any thread, with at most one wake-up in flight. Its owner
    holds its own lock around `ring` and `rearm`."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._event = asyncio.Event()
        self._notified = False

    def ring(self) -> bool:
        """Wake the reader; False once its loop is gone (nobody is reading any more)."""
        if self._notified:
            return True
        self._notified = True
        try:
            self._loop.call_soon_threadsafe(self._event.set)
        except RuntimeError:
            return False
        return True

    def rearm(self) -> None:
        """The reader found nothing: the next `ring` wakes it again."""
        self._notified = False
        self._event.clear()

    async def wait(self) -> None:
        await self._event.wait()


class Subscriber:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._lock = threading.Lock()
        self._events = CoalescedEvents()
        self._wake = LoopWake(loop)
        self._closed = False

    @property
    def coalesced(self) -> int:
        """Progress events replaced before delivery (for tests and stats)."""
        return self._events.coalesced

    def publish(self, event: WireEvent) -> None:
        """Queue `event` (any thread). Never blocks on the reader."""
        with self._lock:
            if self._closed:
                return
            self._events.add(event)
            if event.terminal:
                self._closed = True
            self._wake_reader()

    def close(self) -> None:
        """End the stream after what is queued (any thread)."""
        with self._lock:
            self._closed = True
            self._wake_reader()

    @property
    def closed(self) -> bool:
        return self._closed

    def _wake_reader(self) -> None:
        # Called with the lock held.
        if not self._wake.ring():
            self._closed = True

    async def next(self) -> WireEvent | None:
        """The next event, or None once the stream has ended and everything was delivered."""
        while True:
            with self._lock:
                if self._events:
                    return self._events.pop()
                if self._closed:
                    return None
                self._wake.rearm()
            await self._wake.wait()

    def drain(self) -> list[WireEvent]:
        """Everything queued now, without waiting (for callers outside asyncio)."""
        with self._lock:
            return self._events.take_all()
