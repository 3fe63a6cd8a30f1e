"""ComfyUI's `/ws`: one socket per client id (`sid`), the queue's `status` to all, and each prompt's
messages to the socket of its `client_id`.

A prompt is followed (`follow`) from the moment `POST /prompt` accepts it, or when its client
connects while it is queued or running (after a restart, or on another server of a fleet): its
run's stored events are read as any `/v1` socket reads them and turned into ComfyUI's messages
(`messages.py`). Step previews go out as ComfyUI's binary frames, only for a prompt that asked for
them, type 4 (with its node) to a client that said it reads them, type 1 otherwise. The queue's
`status` goes out whenever a followed prompt is queued, starts or ends, and when a look every
`STATUS_POLL_S` finds the count changed (runs from `/v1` or other servers).
"""

from __future__ import annotations

import asyncio
import json
import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.concurrency import run_in_threadpool

from inline_core.runtime.preview import PreviewImage
from inline_core.server.comfy.ledger import PromptLedger
from inline_core.server.comfy.messages import Message, PromptMessages, message
from inline_core.server.comfy.prompt_meta import PromptMeta
from inline_core.server.manager import RunManager
from inline_core.server.previews import IMAGE_FORMATS, MEDIA_TYPES, binary_frame
from inline_core.server.run_state import RunRecord, RunStatus

log = logging.getLogger(__name__)

STATUS_POLL_S = 1.0
OUTBOX = 1024  # messages waiting for one socket at most (a slow reader loses previews first)
PREVIEW_WITH_METADATA = 4


@dataclass(eq=False)
class Client:
    sid: str
    outbox: asyncio.Queue[str | bytes] = field(
        default_factory=lambda: asyncio.Queue[str | bytes](OUTBOX)
    )
    flags: dict[str, Any] = field(default_factory=dict[str, Any])

    def put(self, item: str | bytes) -> None:
        try:
            self.outbox.put_nowait(item)
        except asyncio.QueueFull:
            log.warning("comfy socket %s reads too slowly; a message was dropped", self.sid)


class ComfyHub:
    def __init__(self, manager: RunManager, ledger: PromptLedger) -> None:
        self._manager = manager
        self._ledger = ledger
        self._clients: dict[str, Client] = {}
        self._following: dict[str, PromptMessages] = {}  # run id -> its translator
        self._tasks: set[asyncio.Task[None]] = set()
        self._status_task: asyncio.Task[None] | None = None
        self._last_remaining: int | None = None

    # ---- sockets -----------------------------------------------------------------------------

    def connect(self, sid: str) -> Client:
        old = self._clients.get(sid)
        if old is not None:
            old.put(b"")  # the old socket of this sid closes (ComfyUI keeps the newest)
        client = Client(sid)
        self._clients[sid] = client
        if self._status_task is None or self._status_task.done():
            self._status_task = asyncio.create_task(self._watch_status())
        return client

    def disconnect(self, client: Client) -> None:
        if self._clients.get(client.sid) is client:
            del self._clients[client.sid]

    async def greet(self, client: Client) -> None:
        """The first messages of a socket: the status with its sid, the node its prompt is
        executing (if one is), and the prompts of its client id still to come."""
        remaining = await run_in_threadpool(self._ledger.queue_remaining)
        client.put(json.dumps(status_message(remaining, client.sid)))
        for run in self._following.values():
            if run.meta.client_id == client.sid and run.current is not None:
                data = {"node": run.current, "display_node": run.current, "prompt_id": run.id}
                client.put(json.dumps(message("executing", data)))
        for status in (RunStatus.RUNNING, RunStatus.QUEUED):
            for prompt in await run_in_threadpool(self._ledger.unfinished, status):
                if prompt.meta.client_id == client.sid:
                    self.follow(prompt.record, prompt.meta)

    def feature_flags(self, client: Client, flags: dict[str, Any]) -> None:
        client.flags = flags

    def _send(self, sid: str | None, item: Message | bytes, *, to_all: bool = False) -> None:
        text = item if isinstance(item, bytes) else json.dumps(item)
        if sid is None:
            if to_all:
                for client in list(self._clients.values()):
                    client.put(text)
            return
        client = self._clients.get(sid)
        if client is not None:
            client.put(text)

    # ---- the queue's status ------------------------------------------------------------------

    async def broadcast_status(self) -> None:
        remaining = await run_in_threadpool(self._ledger.queue_remaining)
        self._last_remaining = remaining
        self._send(None, status_message(remaining), to_all=True)

    async def _watch_status(self) -> None:
        while self._clients:
            await asyncio.sleep(STATUS_POLL_S)
            try:
                remaining = await run_in_threadpool(self._ledger.queue_remaining)
            except Exception as exc:  # the store is away: the next look tries again
                log.debug("comfy status: %s", exc)
                continue
            if remaining != self._last_remaining:
                self._last_remaining = remaining
                self._send(None, status_message(remaining), to_all=True)

    # ---- prompts -----------------------------------------------------------------------------

    def follow(self, record: RunRecord, meta: PromptMeta) -> None:
        """Send prompt `record`'s messages to its client id's socket until it ends."""
        if record.id in self._following or meta.client_id is None:
            return
        ledger = self._ledger

        def finished() -> RunRecord | None:
            found = ledger.get(record.id)
            return None if found is None else found.record

        run = PromptMessages(record, meta, ledger.takes, finished)
        self._following[record.id] = run
        task = asyncio.create_task(self._follow(run))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _follow(self, run: PromptMessages) -> None:
        sid = run.meta.client_id
        loop = asyncio.get_running_loop()
        manager = self._manager
        previews = manager.previews.subscribe(run.id, loop)
        subscriber = None
        following: asyncio.Task[Any] | None = None
        shown: asyncio.Task[PreviewImage] | None = None
        try:
            snapshot, subscriber = await run_in_threadpool(manager.subscribe, run.id, loop)
            await self._deliver(run, sid, [snapshot])
            following = asyncio.create_task(subscriber.next())
            shown = asyncio.create_task(previews.next())
            while True:
                await asyncio.wait({following, shown}, return_when=asyncio.FIRST_COMPLETED)
                if shown.done():
                    self._preview(run, sid, shown.result())
                    shown = asyncio.create_task(previews.next())
                if following.done():
                    event = following.result()
                    if event is None:
                        break
                    if event.terminal:
                        last = previews.take()
                        if last is not None:
                            self._preview(run, sid, last)
                    await self._deliver(run, sid, [event])
                    if event.terminal:
                        break
                    following = asyncio.create_task(subscriber.next())
        except Exception:
            log.exception("comfy prompt %s: its messages stopped", run.id)
        finally:
            for task in (following, shown):
                if task is not None:
                    task.cancel()
            manager.previews.unsubscribe(run.id, previews)
            if subscriber is not None:
                manager.unsubscribe(run.id, subscriber)
            self._following.pop(run.id, None)
        if run.ended:
            await self.broadcast_status()
            self._send(sid, run.end_of_prompt())

    async def _deliver(self, run: PromptMessages, sid: str | None, events: list[Any]) -> None:
        for event in events:
            started = run.started
            out = await run_in_threadpool(run.on_event, event)
            for item in out:
                self._send(sid, item)
            if run.started and not started:
                await self.broadcast_status()

    def _preview(self, run: PromptMessages, sid: str | None, preview: PreviewImage) -> None:
        if not run.meta.extra_data.get("preview_method") or sid is None:
            return
        client = self._clients.get(sid)
        if client is None:
            return
        if client.flags.get("supports_preview_metadata"):
            node = run.prompt_node(preview.node_id) or preview.node_id
            client.put(metadata_frame(preview, run.id, node))
        else:
            client.put(binary_frame(preview))

    async def close(self) -> None:
        for task in [*self._tasks, self._status_task]:
            if task is not None:
                task.cancel()


def status_message(remaining: int, sid: str | None = None) -> Message:
    data: dict[str, Any] = {"status": {"exec_info": {"queue_remaining": remaining}}}
    if sid is not None:
        data["sid"] = sid
    return message("status", data)


def metadata_frame(preview: PreviewImage, prompt_id: str, node: str) -> bytes:
    """ComfyUI's type-4 frame: the event, the metadata's length, its JSON, the image."""
    meta = {
        "node_id": node,
        "prompt_id": prompt_id,
        "display_node_id": node,
        "parent_node_id": None,
        "real_node_id": node,
        "image_type": MEDIA_TYPES[preview.image.format],
    }
    raw = json.dumps(meta).encode()
    assert preview.image.format in IMAGE_FORMATS
    return struct.pack(">II", PREVIEW_WITH_METADATA, len(raw)) + raw + preview.image.data


Sender = Callable[[str | bytes], None]
