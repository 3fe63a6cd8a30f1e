"""`/v1/runs/{id}/events`: a snapshot of the run, then its events, then exactly one terminal event.

The socket is fed from the run's `Subscriber`; a slow reader only makes its own buffer coalesce.
The handler also reads what the client sends, so an abandoned socket is dropped at once. A run's
socket also steers the run: a client's `{"type": "interaction", ...}` message is the body of
`POST /v1/runs/{id}/interactions`, answered in order on the socket, between the events, with
`interaction_queued` or `interaction_refused` (the HTTP status and error envelope; the socket stays
open). Messages are read and answered apart from the events, which take turns with the answers: a
client sending fast is answered 429 past a bound and never holds back its own events
(`socket_steering.py`). Once the terminal event is out the socket closes: a message after it is
not taken.

Sockets are capped in all and per run (`SocketGate`: INLINE_MAX_WEBSOCKETS,
INLINE_MAX_WEBSOCKETS_PER_RUN). Past a cap the handshake is refused before it is accepted, as
every other refusal here is: an HTTP 429 with `Retry-After` and the error envelope (`busy`), or,
where the server cannot answer a handshake with HTTP, a close with code 4429 and the message as
its reason. A refused socket costs nothing after the refusal.

A client that stops reading keeps its slot until its connection ends. What it holds is bounded: its
subscriber's buffer (progress coalesced per node) and the transport's buffer (uvicorn waits for the
transport to drain before each send), and uvicorn's keepalive ping gives up on a silent peer.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any, Protocol, cast

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool
from starlette.websockets import WebSocket, WebSocketDisconnect

from inline_core.errors import InlineError, NotFound
from inline_core.runtime.preview import PreviewImage
from inline_core.server import serialize
from inline_core.server.bootstrap import Services
from inline_core.server.events import Subscriber, WireEvent
from inline_core.server.http_errors import clip_message, inline_error_response
from inline_core.server.interactions import RunInteractions
from inline_core.server.previews import (
    PreviewBoard,
    PreviewSubscriber,
    binary_frame,
    preview_event,
)
from inline_core.server.socket_steering import SocketSteering, Steer

router = APIRouter(prefix="/v1")


async def client_message(websocket: WebSocket) -> str | bytes | None:
    """The client's next message; None once it left."""
    message = await websocket.receive()
    if message["type"] == "websocket.disconnect":
        return None
    text: str | None = message.get("text")
    return text if text is not None else cast(bytes, message.get("bytes") or b"")


# Registered after every other websocket route: an unknown socket path is refused in the envelope.
fallback = APIRouter()


async def deny_socket(websocket: WebSocket, exc: InlineError) -> None:
    """Refuse the handshake with the error envelope (or a 4xxx close code where the server
    cannot send an HTTP answer to a websocket)."""
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(inline_error_response(exc))
    else:
        await websocket.close(code=4000 + exc.status, reason=exc.message[:120])


@fallback.websocket("/{path:path}")
async def unknown_socket(websocket: WebSocket, path: str) -> None:
    await deny_socket(websocket, NotFound("no such websocket route"))


class Feed(Protocol):
    """What a socket streams from: a snapshot and a subscriber for what follows, by key."""

    def subscribe(
        self, key: str, loop: asyncio.AbstractEventLoop, /
    ) -> tuple[WireEvent, Subscriber]: ...

    def unsubscribe(self, key: str, subscriber: Subscriber, /) -> None: ...


async def stream_feed(
    websocket: WebSocket,
    services: Services,
    slot: str,
    feed: Feed,
    key: str,
    previews: PreviewBoard | None = None,
    steer: Steer | None = None,
) -> None:
    """Serve one events socket: take a `SocketGate` slot, send `key`'s snapshot, then each event
    (and, with `previews`, each step preview of run `key`; with `steer`, the answer to each
    client message, `socket_steering.py`) until the feed ends (None) or the client leaves, and
    close. Without `steer` the client's messages are read and dropped."""
    try:
        services.sockets.acquire(slot)
    except InlineError as exc:
        await deny_socket(websocket, exc)
        return
    try:
        await _stream(websocket, feed, key, previews, steer)
    finally:
        services.sockets.release(slot)


async def _stream(
    websocket: WebSocket,
    feed: Feed,
    key: str,
    previews: PreviewBoard | None,
    steer: Steer | None,
) -> None:
    loop = asyncio.get_running_loop()
    try:
        snapshot, subscriber = feed.subscribe(key, loop)
    except InlineError as exc:
        await deny_socket(websocket, exc)
        return
    shown = None if previews is None else previews.subscribe(key, loop)
    steering = SocketSteering(steer)
    tasks: list[asyncio.Task[Any]] = []
    try:
        await websocket.accept()
        await websocket.send_text(snapshot.text())
        reading = asyncio.create_task(steering.read(partial(client_message, websocket)))
        answered = asyncio.create_task(steering.next_answer())
        following = asyncio.create_task(subscriber.next())
        preview = None if shown is None else asyncio.create_task(shown.next())
        tasks = [reading, answered, following] + ([] if preview is None else [preview])
        while True:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            if reading.done():
                reading.result()
                return  # the client went away
            # One of each ready kind a turn: answers and events take turns, neither waits
            # for the other to run dry.
            if answered.done():
                await websocket.send_text(answered.result().text())
                answered = tasks[1] = asyncio.create_task(steering.next_answer())
            if preview is not None and preview.done():
                await _send_preview(websocket, preview.result())
                preview = tasks[3] = asyncio.create_task(cast(PreviewSubscriber, shown).next())
            if following.done():
                event: WireEvent | None = following.result()
                last = None if shown is None or not (event is None or event.terminal) else shown
                waiting = None if last is None else last.take()
                if waiting is not None:  # a run's last preview goes out before its end
                    await _send_preview(websocket, waiting)
                if event is None:
                    break
                await websocket.send_text(event.text())
                if event.terminal:
                    break  # nothing follows it, and no message is answered after it
                following = tasks[2] = asyncio.create_task(subscriber.next())
        await websocket.close(code=1000)
    except (WebSocketDisconnect, RuntimeError, OSError):
        return  # the socket closed under us; nothing to tell anyone
    finally:
        for task in tasks:
            task.cancel()
        feed.unsubscribe(key, subscriber)
        if previews is not None and shown is not None:
            previews.unsubscribe(key, shown)


async def _send_preview(websocket: WebSocket, preview: PreviewImage) -> None:
    """The JSON `preview` event (what the image is), then ComfyUI's binary frame with it."""
    await websocket.send_text(preview_event(preview).text())
    await websocket.send_bytes(binary_frame(preview))


@router.websocket("/runs/{run_id}/events")
async def run_events(websocket: WebSocket, run_id: str) -> None:
    services = cast(Services, websocket.app.state.services)
    manager = services.manager
    steer = RunSteer(manager.interactions, run_id)
    await stream_feed(websocket, services, run_id, manager, run_id, manager.previews, steer)


class RunSteer:
    """A client's interaction messages on the run's socket, queued as the POST route queues
    them (off the event loop: each waits for its durable write) or refused."""

    def __init__(self, interactions: RunInteractions, run_id: str) -> None:
        self.interactions = interactions
        self.run_id = run_id

    async def answer(self, message: str | bytes, /) -> WireEvent:
        try:
            queued = await run_in_threadpool(
                self.interactions.interact_by_message, self.run_id, message
            )
        except InlineError as exc:
            return self.refuse(exc)
        return serialize.interaction_queued_event(self.run_id, queued)

    def refuse(self, error: InlineError, /) -> WireEvent:
        return serialize.interaction_refused_event(
            self.run_id, error.status, error.code, clip_message(error.message)
        )
