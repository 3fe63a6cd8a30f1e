"""`/v1/downloads/{id}/events`: the download's snapshot, then `progress` and `file_done` events,
then exactly one of `download_done`, `error`, `cancelled`, and the socket closes. Sockets count
against the same caps as the runs' (`SocketGate`)."""

from __future__ import annotations

from typing import cast

from fastapi import APIRouter
from starlette.websockets import WebSocket

from inline_core.server.bootstrap import Services
from inline_core.server.websocket import stream_feed

router = APIRouter(prefix="/v1")


@router.websocket("/downloads/{download_id}/events")
async def download_events(websocket: WebSocket, download_id: str) -> None:
    services = cast(Services, websocket.app.state.services)
    key = f"download:{download_id}"  # its own slot key: never counted with a run's sockets
    await stream_feed(websocket, services, key, services.download_feed, download_id)
