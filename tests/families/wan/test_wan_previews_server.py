"""Step previews of real tiny Wan renders on the run's websocket, through the ASGI app and a real
uvicorn: each JSON `preview` event is followed by ComfyUI's binary frame, the image is the
video's first frame at the preview size, the newest is at `GET /v1/runs/{id}/preview`, and the
take's frames are those of the same render without previews."""

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
from test_wan_server import RENDER, finished_state, wan_graph

from inline_core.config import Config
from inline_core.families.wan.kit import WanKit
from inline_core.runtime.video import decode_apng
from inline_core.server.app import create_app
from tests.server.preview_frames import (
    check_previews,
    live_socket_messages,
    post_run_with,
    socket_messages,
)
from tests.server.server_support import LiveServer, post_run, wait_finished

STEPS = RENDER["steps"]


@pytest.fixture
def client(wan_kit: WanKit, tmp_path: Path) -> Iterator[TestClient]:
    config = Config(
        models_dir=wan_kit.root,
        data_dir=tmp_path / "data",
        profile="cpu",
        dtype="float32",
        min_free_disk_mb=0,
        preview_size=32,
    )
    with TestClient(create_app(config)) as c:
        yield c


def take_frames(client: TestClient, state: dict[str, Any]) -> np.ndarray[Any, Any]:
    assert state["status"] == "done", state
    (take,) = state["takes"]
    return decode_apng(client.get(take["uri"]).content)


@pytest.mark.parametrize("method", ["latent2rgb", "taesd"])
def test_previews_arrive_as_comfyui_frames_and_leave_the_take_alone(
    client: TestClient, method: str
) -> None:
    graph = wan_graph(format="png")
    run_id = post_run_with(client, graph, "w", preview=method)
    # The 48 x 32 video's first frame, its longest side the preview size.
    check_previews(socket_messages(client, run_id), (32, 21), method, "w", STEPS)
    state = finished_state(client, run_id)
    latest = client.get(f"/v1/runs/{run_id}/preview")
    assert latest.status_code == 200 and latest.headers["content-type"] == "image/jpeg"
    assert latest.headers["x-preview-step"] == str(STEPS)
    assert latest.headers["x-preview-node"] == "w"
    assert Image.open(io.BytesIO(latest.content)).size == (32, 21)
    plain = finished_state(client, post_run_with(client, graph, "w", preview="none"))
    assert np.array_equal(take_frames(client, state), take_frames(client, plain))


@pytest.fixture(scope="module")
def live(wan_kit: WanKit, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One real server for the module's two tests (a start and its model loads, not two): its
    default preview is taesd at 16 px; the cached-rerun test names its method on every run."""
    env = {
        "INLINE_PREVIEW_METHOD": "taesd",
        "INLINE_PREVIEW_SIZE": "16",
        "INLINE_DTYPE": "float32",
        "INLINE_MIN_FREE_DISK_MB": "0",
    }
    root = tmp_path_factory.mktemp("wan_previews_live")
    server = LiveServer(data_dir=root / "data", models_dir=wan_kit.root, env=env)
    # Liveness bounds: at a load of 11-12 on 2 cores, starting took over 60 s, and so did the
    # render between two of its events (loading the models).
    server.start(timeout=240.0)
    try:
        yield server
    finally:
        server.close()


def test_a_real_server_sends_the_frames(live: LiveServer) -> None:
    model = "wan2.2_ti2v_tiny_fp32.safetensors"  # Wan 2.2's latents: 64 x 32, 16x down
    response = post_run(live, wan_graph(model=model, width=64), "w")  # the server's default
    assert response.status_code == 201, response.text
    run_id = str(response.json()["runId"])
    messages = live_socket_messages(live, run_id, timeout=240.0)
    check_previews(messages, (16, 8), "taesd", "w", STEPS)
    assert wait_finished(live, run_id, timeout=240)["status"] == "done", live.log()


def test_a_cached_rerun_that_asks_for_previews_renders_again_with_them(live: LiveServer) -> None:
    """The same graph rendered without previews, then asking for them: the second run renders
    the node again (it is not answered from the cache) and has its previews; a third asking for
    the same previews reuses the second's render, and its preview 404 says it came from the
    cache."""
    graph = wan_graph(format="png")
    states: list[dict[str, Any]] = []
    for preview in ("none", "latent2rgb", "latent2rgb"):
        response = post_run(live, graph, "w", options={"preview": preview})
        assert response.status_code == 201, response.text
        states.append(wait_finished(live, str(response.json()["runId"]), timeout=240))
    assert [s["status"] for s in states] == ["done"] * 3, live.log()
    assert [s["nodes"]["w"]["state"] for s in states] == ["done", "done", "cached"]
    shown = httpx.get(f"{live.base}/v1/runs/{states[1]['runId']}/preview", timeout=30)
    assert shown.status_code == 200 and shown.headers["x-preview-node"] == "w"
    missing = httpx.get(f"{live.base}/v1/runs/{states[2]['runId']}/preview", timeout=30)
    assert missing.status_code == 404
    error = missing.json()["error"]
    assert error["code"] == "no_preview" and "node cache" in error["message"]
    assert "w" in error["message"]
    hashes = {s["takes"][0]["hash"] for s in states}
    assert len(hashes) == 1  # previews never change the pixels
