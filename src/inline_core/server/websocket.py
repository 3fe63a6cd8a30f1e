"""`/v1/runs/{id}/events`: a snapshot of the run, then its events, then exactly one terminal event.

The socket is fed from the run's `Subscriber`; a slow reader only makes its own buffer coalesce.
The handler also reads what the client sends, so an abandoned socket is dropped at once. A run's
socket also steers the run: a client's `{"type": "interaction", ...}` message is the body of
`POST /v1/runs/{id}/interactions`, answered in order on the socket, between the events, with
`interaction_queued` or `interaction_refused` (the HTTP status and error envelope; the socket stays
open). Once the terminal event is out the socket closes: a message after it is not taken.

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
from collections.abc import Awaitable, Callable
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

router = APIRouter(prefix="/v1")


# Answers one client message with the event to send back.
Answer = Callable[[str | bytes], Awaitable[WireEvent]]


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
    answer: Answer | None = None,
) -> None:
    """Serve one events socket: take a `SocketGate` slot, send `key`'s snapshot, then each event
    (and, with `previews`, each step preview of run `key`; with `answer`, the answer to each
    client message) until the feed ends (None) or the client leaves, and close. Without
    `answer` the client's messages are read and dropped."""
    try:
        services.sockets.acquire(slot)
    except InlineError as exc:
        await deny_socket(websocket, exc)
        return
    try:
        await _stream(websocket, feed, key, previews, answer)
    finally:
        services.sockets.release(slot)


async def _stream(
    websocket: WebSocket,
    feed: Feed,
    key: str,
    previews: PreviewBoard | None,
    answer: Answer | None,
) -> None:
    loop = asyncio.get_running_loop()
    try:
        snapshot, subscriber = feed.subscribe(key, loop)
    except InlineError as exc:
        await deny_socket(websocket, exc)
        return
    shown = None if previews is None else previews.subscribe(key, loop)
    tasks: list[asyncio.Task[Any]] = []
    try:
        await websocket.accept()
        await websocket.send_text(snapshot.text())
        heard = asyncio.create_task(client_message(websocket))
        following = asyncio.create_task(subscriber.next())
        preview = None if shown is None else asyncio.create_task(shown.next())
        tasks = [heard, following] + ([] if preview is None else [preview])
        while True:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            if heard.done():
                message: str | bytes | None = heard.result()
                if message is None:
                    return  # the client went away
                if answer is not None:
                    await websocket.send_text((await answer(message)).text())
                heard = asyncio.create_task(client_message(websocket))
                tasks[0] = heard
                continue
            if preview is not None and preview.done():
                await _send_preview(websocket, preview.result())
                preview = asyncio.create_task(cast(PreviewSubscriber, shown).next())
                tasks[2] = preview
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
                following = asyncio.create_task(subscriber.next())
                tasks[1] = following
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
    steer = partial(_steer, manager.interactions, run_id)
    await stream_feed(websocket, services, run_id, manager, run_id, manager.previews, steer)


async def _steer(interactions: RunInteractions, run_id: str, message: str | bytes) -> WireEvent:
    """A client's interaction message on the run's socket, queued as the POST route queues it
    (off the event loop: it waits for the durable write) or refused."""
    try:
        queued = await run_in_threadpool(interactions.interact_by_message, run_id, message)
    except InlineError as exc:
        return serialize.interaction_refused_event(
            run_id, exc.status, exc.code, clip_message(exc.message)
        )
    return serialize.interaction_queued_event(run_id, queued)
