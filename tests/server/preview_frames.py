"""Reading a run's step previews off its socket, in process (ASGI) or from a real server: each
JSON `preview` event followed by ComfyUI's binary frame (a 4-byte big-endian event type, 1 for a
preview image; a 4-byte image format, 1 for JPEG; the image bytes)."""

from __future__ import annotations

import io
import json
import struct
from typing import Any

from fastapi.testclient import TestClient
from PIL import Image
from websockets.exceptions import ConnectionClosedOK
from websockets.sync.client import connect

from tests.server.server_support import LiveServer

Messages = list[str | bytes]


def decode_frame(frame: bytes) -> tuple[int, int, Image.Image]:
    event_type, image_format = struct.unpack(">II", frame[:8])
    return event_type, image_format, Image.open(io.BytesIO(frame[8:]))


def check_previews(
    messages: Messages, size: tuple[int, int], method: str, node_id: str, steps: int
) -> list[int]:
    """Every preview event is followed by its frame, in ComfyUI's format, at `size`; the steps
    rise to the last, and the run ends after them. Returns their steps."""
    seen: list[int] = []
    for i, message in enumerate(messages):
        if isinstance(message, bytes):
            event = json.loads(messages[i - 1])
            assert event["type"] == "preview"
            event_type, image_format, image = decode_frame(message)
            assert (event_type, image_format, image.format) == (1, 1, "JPEG")
            assert image.size == size == (event["width"], event["height"])
            assert (event["nodeId"], event["stepCount"], event["method"]) == (
                node_id,
                steps,
                method,
            )
            seen.append(int(event["step"]))
        elif json.loads(message)["type"] == "preview":
            assert isinstance(messages[i + 1], bytes)
    assert seen and seen == sorted(set(seen)) and seen[-1] == steps
    assert json.loads(messages[-1])["type"] == "run_done"
    return seen


def socket_messages(client: TestClient, run_id: str) -> Messages:
    """The run's socket in process, binary frames and text, until its terminal event."""
    messages: Messages = []
    with client.websocket_connect(f"/v1/runs/{run_id}/events") as ws:
        while True:
            message = ws.receive()
            if message.get("bytes") is not None:
                messages.append(message["bytes"])
                continue
            text = message.get("text")
            if text is None:
                break
            messages.append(text)
            if json.loads(text)["type"] in ("run_done", "error", "cancelled"):
                break
    return messages


def live_socket_messages(live: LiveServer, run_id: str, timeout: float = 60.0) -> Messages:
    """A real server's socket for the run, until the server closes it."""
    messages: Messages = []
    with connect(f"{live.ws_base}/v1/runs/{run_id}/events", open_timeout=30) as ws:
        try:
            while True:
                messages.append(ws.recv(timeout=timeout))
        except ConnectionClosedOK:
            pass
    return messages


def post_run_with(client: TestClient, graph: dict[str, Any], target: str, **options: Any) -> str:
    """Submit with `options` (e.g. preview="taesd"); returns the run id."""
    body = {"graph": graph, "target": target, "options": options}
    response = client.post("/v1/runs", json=body)
    assert response.status_code == 201, response.text
    return str(response.json()["runId"])
