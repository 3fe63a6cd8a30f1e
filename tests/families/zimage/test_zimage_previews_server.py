"""Step previews of real tiny Z-Image renders on the run's websocket, through the ASGI app and a
real uvicorn: each JSON `preview` event is followed by ComfyUI's binary frame (event type 1,
format 1 JPEG, the bytes), the image is the preview size, the steps come in order, the newest is
at `GET /v1/runs/{id}/preview`, and the take's pixels are those of the same render without
previews."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image
from primitive_graphs import primitive_graph
from test_zimage_server import submit, take_image, wait, zimage_graph

from inline_core.config import Config
from inline_core.families.zimage.kit import KitPaths
from inline_core.server.app import create_app
from tests.server.preview_frames import (
    Messages,
    live_socket_messages,
    post_run_with,
    socket_messages,
)
from tests.server.preview_frames import check_previews as check_frames
from tests.server.server_support import LiveServer, wait_finished

STEPS = 3


def preview_client(kit: KitPaths, tmp_path: Path, **settings: Any) -> TestClient:
    config = Config(
        models_dir=kit.root,
        data_dir=tmp_path / "data",
        profile="cpu",
        dtype="float32",
        min_free_disk_mb=0,
        **settings,
    )
    return TestClient(create_app(config))


@pytest.fixture
def client(kit: KitPaths, tmp_path: Path) -> Iterator[TestClient]:
    with preview_client(kit, tmp_path, preview_size=32) as c:
        yield c


def check_previews(
    messages: Messages, size: tuple[int, int], method: str, node_id: str = "z"
) -> list[int]:
    return check_frames(messages, size, method, node_id, STEPS)


def post(client: TestClient, graph: dict[str, Any], target: str = "z", **options: str) -> str:
    return post_run_with(client, graph, target, **options)


@pytest.mark.parametrize("method", ["latent2rgb", "taesd"])
def test_previews_arrive_as_comfyui_frames_and_leave_the_take_alone(
    client: TestClient, method: str
) -> None:
    graph = zimage_graph("a lantern", steps=STEPS, seed=11, width=96, height=64)
    run_id = post(client, graph, preview=method)
    check_previews(socket_messages(client, run_id), (32, 21), method)
    state = wait(client, run_id)
    latest = client.get(f"/v1/runs/{run_id}/preview")
    assert latest.status_code == 200 and latest.headers["content-type"] == "image/jpeg"
    assert latest.headers["x-preview-step"] == str(STEPS)
    assert latest.headers["x-preview-node"] == "z"
    assert Image.open(io.BytesIO(latest.content)).size == (32, 21)
    # The same render with previews off: the same pixels.
    plain = wait(client, submit(client, graph))
    ours, theirs = take_image(client, state["takes"][0]), take_image(client, plain["takes"][0])
    assert np.array_equal(np.asarray(ours), np.asarray(theirs))


def test_the_server_default_applies_and_a_run_may_turn_it_off(
    kit: KitPaths, tmp_path: Path
) -> None:
    with preview_client(kit, tmp_path, preview_method="latent2rgb") as client:
        graph = zimage_graph("a kite", steps=STEPS, seed=3)
        run_id = submit(client, graph)  # no options: the server's method, at the picture's size
        check_previews(socket_messages(client, run_id), (64, 64), "latent2rgb")
        off = post(client, graph, preview="none")
        messages = socket_messages(client, off)
        assert not any(isinstance(m, bytes) for m in messages)
        assert client.get(f"/v1/runs/{off}/preview").json()["error"]["code"] == "no_preview"


def test_the_sample_primitive_previews_its_latent_batch(client: TestClient) -> None:
    graph = primitive_graph("a kite", steps=STEPS, batch=2)
    run_id = post(client, graph, "decode", preview="latent2rgb")
    # The batch's first item is the node's preview, as in ComfyUI.
    check_previews(socket_messages(client, run_id), (32, 32), "latent2rgb", "sample")
    assert wait(client, run_id)["status"] == "done"


def test_a_real_server_sends_the_frames(zimage_live: LiveServer) -> None:
    live = zimage_live  # the shared server (conftest.py): taesd at 16 px by default
    graph = zimage_graph("a lantern", steps=STEPS, seed=2)
    response = httpx.post(f"{live.base}/v1/runs", json={"graph": graph, "target": "z"})
    assert response.status_code == 201, response.text
    run_id = response.json()["runId"]
    check_previews(live_socket_messages(live, run_id), (16, 16), "taesd")
    assert wait_finished(live, run_id)["status"] == "done"
