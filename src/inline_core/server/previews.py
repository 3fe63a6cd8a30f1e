"""`PreviewBoard`: each run's newest step preview, and the sockets waiting for the next one.

Previews are delivered, never stored: the preview worker hands each image here (its thread), the
board keeps the newest per run (for `GET /v1/runs/{id}/preview`, the last `KEEP` runs) and gives
it to every socket of that run. A socket holds one preview at most: a newer one replaces one it
has not sent yet, so a slow client gets the newest preview, never a backlog. Only the server
running a run has its previews; elsewhere in a fleet the route answers `no_preview`.
"""

from __future__ import annotations

import asyncio
import struct
import threading
from collections import OrderedDict

from inline_core.runtime.preview import NONE, PreviewImage
from inline_core.server.events import LoopWake, WireEvent
from inline_core.server.run_options import preview_method
from inline_core.server.run_state import NodeStatus, RunRecord, RunStatus

KEEP = 256  # runs whose newest preview is kept after they end

# ComfyUI's binary websocket frame: a 4-byte big-endian event type (1: a preview image), a 4-byte
# image format (1 JPEG, 2 PNG), then the image bytes.
PREVIEW_IMAGE = 1
IMAGE_FORMATS = {"jpeg": 1, "png": 2}
MEDIA_TYPES = {"jpeg": "image/jpeg", "png": "image/png"}


def binary_frame(preview: PreviewImage) -> bytes:
    header = struct.pack(">II", PREVIEW_IMAGE, IMAGE_FORMATS[preview.image.format])
    return header + preview.image.data


def preview_event(preview: PreviewImage) -> WireEvent:
    """The JSON event sent just before a preview's binary frame: what the image is."""
    image = preview.image
    body = {
        "type": "preview",
        "runId": preview.run_id,
        "nodeId": preview.node_id,
        "step": preview.step,
        "stepCount": preview.step_count,
        "method": image.method,
        "format": image.format,
        "width": image.width,
        "height": image.height,
    }
    return WireEvent("preview", body, node_id=preview.node_id)


def no_preview_reason(run: RunRecord, server_id: str, default_method: str) -> str:
    """Why a run has no preview to serve here, from what is known of it: off, not started,
    another server's, answered from the node cache, or not rendered (yet)."""
    if preview_method(run.options, default_method) == NONE:
        return "previews are off for it (options.preview, --preview-method)"
    if run.status == RunStatus.QUEUED:
        return "it has not started yet"
    if run.holder is not None and run.holder != server_id:
        return f"server {run.holder!r} runs it, and previews are delivered, never stored"
    cached = sorted(k for k, n in run.nodes.items() if n.state == NodeStatus.CACHED)
    if cached:
        return (
            f"nodes {', '.join(cached)} came from the node cache: a cached sampler is not "
            "sampled again, and its previews went to the run that rendered it (change a param "
            "or the seed to render again)"
        )
    if run.status == RunStatus.RUNNING:
        return "none rendered yet (a node that samples sends one after each step)"
    return (
        "none was rendered (only a node that samples previews its steps), or it ended before "
        f"this server started (the newest {KEEP} runs' are kept)"
    )


class PreviewSubscriber:
    """One socket's next preview (newest wins), fed from any thread, read from asyncio."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._lock = threading.Lock()
        self._waiting: PreviewImage | None = None
        self._wake = LoopWake(loop)
        self.replaced = 0  # previews a newer one replaced before they were sent

    def publish(self, preview: PreviewImage) -> None:
        with self._lock:
            if self._waiting is not None:
                self.replaced += 1
            self._waiting = preview
            self._wake.ring()  # False: its loop is gone, and so is its reader

    def take(self) -> PreviewImage | None:
        """The preview waiting now, if any (sent before a terminal event: the last one out)."""
        with self._lock:
            preview, self._waiting = self._waiting, None
            return preview

    async def next(self) -> PreviewImage:
        while True:
            with self._lock:
                if self._waiting is not None:
                    preview, self._waiting = self._waiting, None
                    return preview
                self._wake.rearm()
            await self._wake.wait()


class PreviewBoard:
    def __init__(self, keep: int = KEEP) -> None:
        self._keep = keep
        self._lock = threading.Lock()
        self._latest: OrderedDict[str, PreviewImage] = OrderedDict()
        self._subscribers: dict[str, list[PreviewSubscriber]] = {}
        self.published = 0

    def publish(self, preview: PreviewImage) -> None:
        """A new preview of a run (the preview worker's thread; never blocks on a socket)."""
        with self._lock:
            self.published += 1
            self._latest[preview.run_id] = preview
            self._latest.move_to_end(preview.run_id)
            while len(self._latest) > self._keep:
                self._latest.popitem(last=False)
            subscribers = list(self._subscribers.get(preview.run_id, ()))
        for subscriber in subscribers:
            subscriber.publish(preview)

    def latest(self, run_id: str) -> PreviewImage | None:
        with self._lock:
            return self._latest.get(run_id)

    def subscribe(self, run_id: str, loop: asyncio.AbstractEventLoop) -> PreviewSubscriber:
        subscriber = PreviewSubscriber(loop)
        with self._lock:
            self._subscribers.setdefault(run_id, []).append(subscriber)
        return subscriber

    def unsubscribe(self, run_id: str, subscriber: PreviewSubscriber) -> None:
        with self._lock:
            subscribers = self._subscribers.get(run_id, [])
            subscribers[:] = [s for s in subscribers if s is not subscriber]
            if not subscribers:
                self._subscribers.pop(run_id, None)
