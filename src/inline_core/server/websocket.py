"""`/v1/runs/{id}/events`: a snapshot of the run, then its events, then exactly one terminal event.

The socket is fed from the run's `Subscriber`; a slow reader only makes its own buffer coalesce.
The handler also watches for the client leaving, so an abandoned socket is dropped at once.

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
from typing import cast

from fastapi import APIRouter
from starlette.websockets import WebSocket, WebSocketDisconnect

from inline_core.errors import InlineError, NotFound
from inline_core.server.bootstrap import Services
from inline_core.server.events import WireEvent
from inline_core.server.http_errors import inline_error_response

router = APIRouter(prefix="/v1")


async def client_left(websocket: WebSocket) -> None:
    while True:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            return


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


@router.websocket("/runs/{run_id}/events")
async def run_events(websocket: WebSocket, run_id: str) -> None:
    services = cast(Services, websocket.app.state.services)
    try:
        services.sockets.acquire(run_id)
    except InlineError as exc:
        await deny_socket(websocket, exc)
        return
    try:
        await _serve_events(websocket, services, run_id)
    finally:
        services.sockets.release(run_id)


async def _serve_events(websocket: WebSocket, services: Services, run_id: str) -> None:
    manager = services.manager
    try:
        snapshot, subscriber = manager.subscribe(run_id, asyncio.get_running_loop())
    except InlineError as exc:
        await deny_socket(websocket, exc)
        return
    left: asyncio.Task[None] | None = None
    try:
        await websocket.accept()
        await websocket.send_text(snapshot.text())
        left = asyncio.create_task(client_left(websocket))
        while True:
            following = asyncio.create_task(subscriber.next())
            await asyncio.wait({following, left}, return_when=asyncio.FIRST_COMPLETED)
            if not following.done():
                following.cancel()
                return  # the client went away
            event: WireEvent | None = following.result()
            if event is None:
                break
            await websocket.send_text(event.text())
        await websocket.close(code=1000)
    except (WebSocketDisconnect, RuntimeError, OSError):
        return  # the socket closed under us; nothing to tell anyone
    finally:
        if left is not None:
            left.cancel()
        manager.unsubscribe(run_id, subscriber)
