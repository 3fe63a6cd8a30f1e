"""`/v1/downloads/{id}/events`: the download's snapshot, then `progress` and `file_done` events,
then exactly one of `download_done`, `error`, `cancelled`, and the socket closes. Sockets count
against the same caps as the runs' (`SocketGate`)."""

from __future__ import annotations

import asyncio
from typing import cast

from fastapi import APIRouter
from starlette.websockets import WebSocket, WebSocketDisconnect

from inline_core.errors import InlineError
from inline_core.server.bootstrap import Services
from inline_core.server.events import WireEvent
from inline_core.server.websocket import client_left, deny_socket

router = APIRouter(prefix="/v1")


@router.websocket("/downloads/{download_id}/events")
async def download_events(websocket: WebSocket, download_id: str) -> None:
    services = cast(Services, websocket.app.state.services)
    key = f"download:{download_id}"
    try:
        services.sockets.acquire(key)
    except InlineError as exc:
        await deny_socket(websocket, exc)
        return
    try:
        await _serve(websocket, services, download_id)
    finally:
        services.sockets.release(key)


async def _serve(websocket: WebSocket, services: Services, download_id: str) -> None:
    feed = services.download_feed
    try:
        snapshot, subscriber = feed.subscribe(download_id, asyncio.get_running_loop())
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
        return
    finally:
        if left is not None:
            left.cancel()
        feed.unsubscribe(download_id, subscriber)
