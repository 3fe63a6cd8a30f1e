"""`GET /v1/runs/{run_id}/media/{node_id}`: a node's video while it decodes, then its take.

While the node's video decodes on this server, the answer is a fragmented H.264 MP4 over chunked
transfer, from the first frame (whenever the client joins) to the last, with its soundtrack
where it has one, ending once the take is written (`runtime/video_stream.py`: each client's own
stream, encoded as the frames arrive). A client that asks before the decode starts waits for
it (the run queued or denoising here). Once the node has its take, the take's bytes are the
answer (`/v1/takes/{id}/bytes`'s). A run another server of a fleet runs has no live video here:
409 until its take is written. A node that ends without a take (an error, a cancel, or a node
that makes none) is a 404.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import cast

import anyio
from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from inline_core.errors import Conflict, NotFound
from inline_core.runtime.video_stream import LiveVideo, Mp4Fragments
from inline_core.server.bootstrap import Services
from inline_core.server.routes import take_bytes
from inline_core.server.run_state import RunStatus
from inline_core.server.schemas import error_responses

router = APIRouter(prefix="/v1")

WAIT_S = 1.0  # how long one wait for frames (or for the node to start) blocks a worker thread


@router.get(
    "/runs/{run_id}/media/{node_id}",
    response_class=Response,
    responses={
        200: {"description": "live fragmented MP4, or the take", "content": {"video/mp4": {}}},
        **error_responses(404, 409),
    },
)
async def run_media(request: Request, run_id: str, node_id: str) -> Response:
    s = cast(Services, request.app.state.services)
    manager = s.manager
    record, _ = await run_in_threadpool(manager.get, run_id)  # 404 for an unknown run
    if not any(n.get("id") == node_id for n in record.graph.get("nodes", [])):
        raise NotFound(f"run {run_id!r} has no node {node_id!r}")
    while True:
        live = manager.videos.get(run_id, node_id)
        if live is not None:
            headers = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}
            return StreamingResponse(_live_mp4(live), 200, headers, "video/mp4")
        record, takes = await run_in_threadpool(manager.get, run_id)
        take = next((t for t in takes if t.node_id == node_id), None)
        if take is not None:
            return await take_bytes(request, take.id)
        if record.status.finished:
            raise NotFound(
                f"node {node_id!r} of run {run_id!r} has no media: the run ended "
                f"{record.status.value} without a take from it"
            )
        if record.status == RunStatus.RUNNING and record.holder not in (None, manager.server_id):
            raise Conflict(
                f"run {run_id!r} runs on server {record.holder!r}: its video streams there; "
                "here, its take is served once written"
            )
        if await request.is_disconnected():
            return Response(status_code=204)  # nobody reads this answer
        await anyio.to_thread.run_sync(
            manager.videos.wait, run_id, node_id, WAIT_S, abandon_on_cancel=True
        )


async def _live_mp4(live: LiveVideo) -> AsyncIterator[bytes]:
    """The live video's frames as one client's fragmented MP4, encoded off the event loop as
    they arrive; the last fragments once the video has ended with its take written."""
    stream = Mp4Fragments(live.fps)
    seen = 0
    try:
        while True:
            chunks, ended = await anyio.to_thread.run_sync(
                live.chunks_after, seen, WAIT_S, abandon_on_cancel=True
            )
            for frames in chunks:
                data = await anyio.to_thread.run_sync(stream.add, frames, live.audio)
                seen += 1
                if data:
                    yield data
            if ended:
                if live.ok:
                    tail = await anyio.to_thread.run_sync(stream.finish)
                    if tail:
                        yield tail
                return
    finally:
        stream.close()
