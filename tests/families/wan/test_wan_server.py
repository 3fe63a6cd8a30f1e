"""Wan end to end through the HTTP API, in process (ASGI) and on a real uvicorn: a prompt graph
renders a video take (H.264 MP4 by default, a lossless APNG on request) stored and served like an
image take, each decoded chunk is streamed on the run's socket before the take, and bad params and
missing pieces are refused at submit with 422 naming them."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
from pathlib import Path
from typing import Any, cast

import av
import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image
from wan_harness import PROMPT, reference_frames
from websockets.exceptions import ConnectionClosedOK
from websockets.sync.client import connect

from inline_core.config import Config
from inline_core.families.wan.descriptor import NODE_TYPE
from inline_core.families.wan.kit import WanKit
from inline_core.runtime.video import decode_apng
from inline_core.server.app import create_app
from tests.families.import_harness import finished as finished_state
from tests.server.server_support import (
    LiveServer,
    post_run,
    slow_graph,
    wait_finished,
)

RENDER: dict[str, Any] = {"width": 48, "height": 32, "frames": 9, "steps": 3, "seed": 11}


def wan_graph(prompt: str = PROMPT, image: str | None = None, **params: Any) -> dict[str, Any]:
    node: dict[str, Any] = {
        "id": "w",
        "type": NODE_TYPE,
        "params": {**RENDER, **params},
        "inputs": {"prompt": {"from": "p", "output": "text"}},
    }
    nodes: list[dict[str, Any]] = [{"id": "p", "type": "input/text", "params": {"text": prompt}}]
    if image is not None:
        asset = {"ref": "asset", "id": image}
        nodes.append({"id": "i", "type": "input/image", "params": {"asset": asset}})
        node["inputs"]["image"] = {"from": "i", "output": "image"}
    return {"schemaVersion": 1, "nodes": [*nodes, node]}


def submit(client: TestClient, graph: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/v1/runs", json={"graph": graph, "target": "w"})
    assert response.status_code == 201, response.text
    return finished_state(client, str(response.json()["runId"]))


def mp4_frames(data: bytes) -> tuple[str, str, int]:
    with av.open(io.BytesIO(data), "r") as container:
        stream = container.streams.video[0]
        count = sum(1 for _frame in container.decode(stream))
        return stream.codec_context.name, str(stream.codec_context.pix_fmt), count


def embedded_graph(metadata: dict[str, str]) -> dict[str, Any]:
    """The Wan node's params in the graph a take carries (checked against its own params)."""
    assert metadata["inline:target"] == metadata["inline:node"] == "w"
    params: dict[str, Any] = json.loads(metadata["inline:params"])
    graph: dict[str, Any] = json.loads(metadata["inline:graph"])
    [node] = [n for n in graph["nodes"] if n["id"] == "w"]
    assert params["seed"] == node["params"]["seed"]
    return node["params"]


def test_default_take_is_an_h264_mp4_served_as_video(client: TestClient) -> None:
    state = submit(client, wan_graph())
    assert state["status"] == "done", state
    (take,) = state["takes"]
    assert take["kind"] == "video"
    response = client.get(take["uri"])
    assert response.status_code == 200
    assert response.headers["content-type"] == "video/mp4"
    data = response.content
    assert take["hash"] == "sha256-" + hashlib.sha256(data).hexdigest()
    assert mp4_frames(data) == ("h264", "yuv420p", 9)
    assert take["params"]["frames"] == 9 and take["params"]["fps"] == 16
    with av.open(io.BytesIO(data), "r") as container:  # its graph and params, as a PNG take's
        embedded = embedded_graph(container.metadata)
    # The model the node picked ("auto") is named in the graph it carries: it renders the same.
    assert embedded["model"] == take["params"]["model"] and embedded["seed"] == RENDER["seed"]


def test_png_take_is_the_wan_pipelines_frames_exactly(
    client: TestClient, wan_reference: Any
) -> None:
    state = submit(client, wan_graph(format="png", guidance=1.0, model="wan2.1_t2v_tiny_diffusers"))
    assert state["status"] == "done", state
    (take,) = state["takes"]
    response = client.get(take["uri"])
    assert response.headers["content-type"] == "image/apng"
    frames = decode_apng(response.content).astype(np.int16)
    ref = reference_frames(wan_reference, guidance=1.0)
    assert np.array_equal(frames, ref)
    with Image.open(io.BytesIO(response.content)) as apng:  # in its text chunks
        embedded = embedded_graph(cast(dict[str, str], getattr(apng, "text")))  # noqa: B009
    assert embedded["model"] == "wan2.1_t2v_tiny_diffusers" and embedded["format"] == "png"
    again = client.get(take["uri"])  # immutable: the same bytes every time
    assert again.content == response.content


@pytest.mark.parametrize(
    ("params", "with_image", "names"),
    [
        ({"frames": 80}, False, "'frames'"),
        ({"width": 40}, False, "width"),
        ({"format": "gif"}, False, "format"),
        ({}, True, "image"),
    ],
    ids=["frames-not-4k+1", "width-not-16", "unknown-format", "image-into-t2v"],
)
def test_bad_params_are_refused_at_submit(
    client: TestClient, params: dict[str, Any], with_image: bool, names: str
) -> None:
    image = None
    if with_image:
        buf = io.BytesIO()
        Image.new("RGB", (48, 32), (200, 100, 50)).save(buf, format="PNG")
        uploaded = client.post(
            "/v1/assets", content=buf.getvalue(), headers={"content-type": "image/png"}
        )
        assert uploaded.status_code == 201, uploaded.text
        image = str(uploaded.json()["id"])
    graph = wan_graph(image=image, **params)
    response = client.post("/v1/runs", json={"graph": graph, "target": "w"})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert names in error["message"]


def test_a_missing_vae_is_model_missing_naming_it_and_where_it_goes(
    wan_kit: WanKit, tmp_path: Path
) -> None:
    assert wan_kit.diffusion_file is not None and wan_kit.text_encoder_file is not None
    assert wan_kit.tokenizer_dir is not None
    models = tmp_path / "models"
    (models / "diffusion_models").mkdir(parents=True)
    (models / "text_encoders").mkdir()
    shutil.copy(wan_kit.diffusion_file, models / "diffusion_models")
    shutil.copy(wan_kit.text_encoder_file, models / "text_encoders" / "umt5.safetensors")
    config = Config(models_dir=models, data_dir=tmp_path / "data", profile="cpu")
    with TestClient(create_app(config)) as client:
        response = client.post("/v1/runs", json={"graph": wan_graph(), "target": "w"})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "model_missing" and error["nodeId"] == "w"
    assert "vae" in error["message"] and str(models / "vae") in error["message"]
    assert "wan_2.1_vae.safetensors" in error["message"]
    assert "tokenizer" in error["message"]  # the single-file UMT5 has none beside it
    assert "umt5-xxl-tokenizer" in error["message"]


def test_live_server_streams_chunks_then_the_take(wan_live: LiveServer) -> None:
    """The socket is open before the render starts: the server's one run worker, held by a slow
    test node until the Wan run's socket is connected, then cancelled."""
    live = wan_live  # the shared server (conftest.py)
    blocker = post_run(live, slow_graph(steps=100_000, delay=0.01), "s")
    assert blocker.status_code == 201, blocker.text
    blocker_id = str(blocker.json()["runId"])
    response = post_run(live, wan_graph(frames=13), "w")
    assert response.status_code == 201, response.text
    run_id = str(response.json()["runId"])
    events: list[dict[str, Any]] = []
    with connect(f"{live.ws_base}/v1/runs/{run_id}/events", open_timeout=30) as ws:
        events.append(json.loads(ws.recv(timeout=30)))  # the snapshot: subscribed
        assert events[0]["state"]["status"] == "queued"
        httpx.delete(f"{live.base}/v1/runs/{blocker_id}", timeout=30)
        try:
            while True:
                events.append(json.loads(ws.recv(timeout=120)))
        except ConnectionClosedOK:
            pass
    state = wait_finished(live, run_id, timeout=120)
    assert state["status"] == "done", live.log()
    (take,) = state["takes"]
    video = httpx.get(live.base + take["uri"], timeout=30)
    assert video.headers["content-type"] == "video/mp4"
    assert mp4_frames(video.content)[2] == 13
    kinds = [(e["type"], e.get("nodeId")) for e in events]
    chunks = [e for e in events if e["type"] == "chunk"]
    assert [(c["firstFrame"], c["frames"]) for c in chunks] == [(0, 1), (1, 4), (5, 4), (9, 4)]
    assert all(c["totalFrames"] == 13 and c["nodeId"] == "w" for c in chunks)
    assert all(c["fps"] == 16 for c in chunks)  # Wan 2.1's own
    assert kinds.index(("chunk", "w")) < kinds.index(("node_done", "w"))


def test_video_takes_report_their_facts_and_the_node_its_defaults(wan_live: LiveServer) -> None:
    """A video take says its content type, size, frame count, fps and duration (MP4 and APNG
    alike, read from its file), and the node's descriptor gives its size, frames and fps."""
    live = wan_live  # the shared server (conftest.py)
    described = httpx.get(f"{live.base}/v1/models/{NODE_TYPE}", timeout=30).json()
    defaults = {p["name"]: p["default"] for p in described["params"]}
    assert [defaults[k] for k in ("width", "height", "frames", "fps")] == [832, 480, 81, 16]
    takes: dict[str, dict[str, Any]] = {}
    for video_format in ("mp4", "png"):
        graph = wan_graph(frames=9, fps=12, format=video_format)
        response = post_run(live, graph, "w")
        assert response.status_code == 201, response.text
        state = wait_finished(live, str(response.json()["runId"]), timeout=120)
        assert state["status"] == "done", live.log()
        (takes[video_format],) = state["takes"]
    stored = httpx.get(f"{live.base}/v1/takes/{takes['mp4']['id']}", timeout=30).json()
    assert stored == takes["mp4"]
    for video_format, content_type in (("mp4", "video/mp4"), ("png", "image/apng")):
        take = takes[video_format]
        facts = {k: take[k] for k in ("contentType", "width", "height", "frames", "fps")}
        assert facts == {
            "contentType": content_type,
            "width": 48,
            "height": 32,
            "frames": 9,
            "fps": 12.0,
        }
        assert take["durationS"] == 0.75
