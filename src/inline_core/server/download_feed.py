"""Every `/v1/downloads/{id}/events` socket, fed from the download manager's events.

A socket subscribes first, then reads the download's snapshot, so no event falls between the two
(a progress event the snapshot already covers is harmless). The subscriber coalesces progress,
so a slow reader costs a few events, and the manager's thread never waits on a socket.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from inline_core.downloads.manager import DownloadManager
from inline_core.server.events import Subscriber, WireEvent

PROGRESS_KEY = "download"  # one coalescing slot: a newer progress replaces an undelivered one


class DownloadFeed:
    def __init__(self, manager: DownloadManager) -> None:
        self._manager = manager
        self._lock = threading.Lock()
        self._subscribers: dict[str, set[Subscriber]] = {}
        manager.add_listener(self._publish)

    def subscribe(
        self, download_id: str, loop: asyncio.AbstractEventLoop
    ) -> tuple[WireEvent, Subscriber]:
        """The snapshot and a subscriber for what follows (NotFound for an unknown download;
        for a finished one the subscriber holds its terminal event)."""
        subscriber = Subscriber(loop)
        with self._lock:
            self._subscribers.setdefault(download_id, set()).add(subscriber)
        try:
            state = self._manager.get(download_id)
        except BaseException:
            self.unsubscribe(download_id, subscriber)
            raise
        if state["status"] in ("done", "error", "cancelled"):
            subscriber.publish(_terminal(state))
        return WireEvent("snapshot", {"type": "snapshot", "download": state}), subscriber

    def unsubscribe(self, download_id: str, subscriber: Subscriber) -> None:
        with self._lock:
            subscribers = self._subscribers.get(download_id)
            if subscribers is not None:
                subscribers.discard(subscriber)
                if not subscribers:
                    del self._subscribers[download_id]

    def _publish(self, download_id: str, event: dict[str, Any]) -> None:
        with self._lock:
            subscribers = list(self._subscribers.get(download_id, ()))
        if not subscribers:
            return
        kind = str(event["type"])
        wire = WireEvent(kind, event, PROGRESS_KEY if kind == "progress" else None)
        for subscriber in subscribers:
            subscriber.publish(wire)


def _terminal(state: dict[str, Any]) -> WireEvent:
    status = state["status"]
    if status == "done":
        return WireEvent("download_done", {"type": "download_done", "download": state})
    if status == "cancelled":
        return WireEvent("cancelled", {"type": "cancelled", "downloadId": state["downloadId"]})
    body = {"type": "error", "downloadId": state["downloadId"], "error": state["error"]}
    return WireEvent("error", body)
