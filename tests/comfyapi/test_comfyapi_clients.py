"""Plain ComfyUI clients against a real server: one in the style of ComfyUI's own API example
(the socket first, then the prompt), one that posts first and trusts `status.queue_remaining`
(as comfy-api-simplified does); then the server is killed (-9) and its history is still there."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from comfy_support import Json, http_json, queue_prompt, view, zimage_prompt
from PIL import Image
from websockets.sync.client import connect

from tests.server.server_support import LiveServer


@pytest.fixture(scope="module")
def live(kit_models: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("comfy-live")
    server = LiveServer(data_dir=root / "data", models_dir=kit_models)
    server.start()
    try:
        yield server
    finally:
        server.close()


def example_client(live: LiveServer, prompt: Json) -> tuple[str, list[bytes]]:
    """ComfyUI's websocket_api_example.py: connect, queue, wait for the end, read the images."""
    client_id = str(uuid.uuid4())
    with connect(f"{live.ws_base}/ws?clientId={client_id}", open_timeout=30) as ws:
        prompt_id = queue_prompt(live.base, prompt, client_id)
        while True:
            out = ws.recv(timeout=120)
            if isinstance(out, str):
                message = cast(Json, json.loads(out))
                if message["type"] == "executing":
                    data = message["data"]
                    if data["node"] is None and data["prompt_id"] == prompt_id:
                        break  # execution is done
    history = http_json(live.base, f"/history/{prompt_id}")[prompt_id]
    images: list[bytes] = []
    for node_output in history["outputs"].values():
        for image in node_output.get("images", []):
            data, _media = view(live.base, image)
            images.append(data)
    return prompt_id, images


def post_first_client(live: LiveServer, prompt: Json) -> Json:
    """Posts, then connects and waits for its end or for an empty queue, then reads history."""
    client_id = uuid.uuid4().hex
    prompt_id = queue_prompt(live.base, prompt, client_id)
    with connect(f"{live.ws_base}/ws?clientId={client_id}", open_timeout=30) as ws:
        while True:
            message = cast(Json, json.loads(ws.recv(timeout=120)))
            data = message["data"]
            if message["type"] == "status" and data["status"]["exec_info"]["queue_remaining"] == 0:
                break
            if message["type"] == "executing" and data["node"] is None:
                if data["prompt_id"] == prompt_id:
                    break
    history = cast(dict[str, Any], http_json(live.base, f"/history/{prompt_id}"))
    return cast(Json, history[prompt_id])


def test_both_clients_then_history_survives_kill_9(live: LiveServer) -> None:
    prompt_id, images = example_client(live, zimage_prompt("a lighthouse", seed=3))
    (image,) = images
    assert image[:8] == b"\x89PNG\r\n\x1a\n"
    later = post_first_client(live, zimage_prompt("a harbour at night", seed=4))
    assert later["status"]["status_str"] == "success"
    (item,) = later["outputs"]["9"]["images"]
    live.kill9()
    live.start()
    history = http_json(live.base, "/history")
    assert prompt_id in history
    assert history[prompt_id]["status"]["status_str"] == "success"
    data, media = view(live.base, item)
    assert media == "image/png"
    from io import BytesIO

    assert Image.open(BytesIO(data)).size == (64, 64)
    jobs = http_json(live.base, "/api/jobs?status=completed")["jobs"]
    assert {prompt_id} <= {j["id"] for j in jobs}
