"""Event fan-out: one `Subscriber` per websocket, fed from worker threads, read from asyncio.

A subscriber's buffer is bounded by the graph, not by the run's length: progress is coalesced per
node (a newer tick replaces an undelivered older one in place, so order is kept), while run_started,
node_done and the terminal event are always kept. A client that stops reading therefore costs at
most a few events per node, and a worker publishing never waits on a socket.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

TERMINAL_EVENTS = frozenset({"run_done", "error", "cancelled"})


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


class Subscriber:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._items: deque[WireEvent] = deque()
        self._pending_progress: dict[str, WireEvent] = {}
        self._wake = asyncio.Event()
        self._notified = False
        self._closed = False
        self.coalesced = 0  # progress events replaced before delivery (for tests and stats)

    def publish(self, event: WireEvent) -> None:
        """Queue `event` (any thread). Never blocks on the reader."""
        with self._lock:
            if self._closed:
                return
            if event.type == "progress" and event.node_id is not None:
                pending = self._pending_progress.get(event.node_id)
                if pending is not None:
                    # Replace the undelivered tick in place: its slot keeps the order.
                    pending.body = event.body
                    pending._text = None  # pyright: ignore[reportPrivateUsage] same module
                    self.coalesced += 1
                    self._wake_reader()
                    return
                self._pending_progress[event.node_id] = event
            self._items.append(event)
            if event.terminal:
                self._closed = True
            self._wake_reader()

    def close(self) -> None:
        """End the stream after what is queued (any thread)."""
        with self._lock:
            self._closed = True
            self._wake_reader()

    def _wake_reader(self) -> None:
        # Called with the lock held; at most one wake-up is in flight per subscriber.
        if self._notified:
            return
        self._notified = True
        try:
            self._loop.call_soon_threadsafe(self._wake.set)
        except RuntimeError:  # the loop is gone: nobody is reading any more
            self._closed = True

    def _take(self) -> WireEvent:
        item = self._items.popleft()
        if item.node_id is not None and self._pending_progress.get(item.node_id) is item:
            del self._pending_progress[item.node_id]
        return item

    async def next(self) -> WireEvent | None:
        """The next event, or None once the stream has ended and everything was delivered."""
        while True:
            with self._lock:
                if self._items:
                    return self._take()
                if self._closed:
                    return None
                self._notified = False
                self._wake.clear()
            await self._wake.wait()

    def drain(self) -> list[WireEvent]:
        """Everything queued now, without waiting (for callers outside asyncio)."""
        out: list[WireEvent] = []
        with self._lock:
            while self._items:
                out.append(self._take())
        return out
