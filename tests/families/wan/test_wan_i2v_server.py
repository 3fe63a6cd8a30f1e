"""Wan 2.2 TI2V image-to-video through the HTTP API, in process (ASGI) and on a real uvicorn: an
uploaded image wired into `alibaba/wan` on the 5B renders a video whose first frame it is, equal to
`WanImageToVideoPipeline`'s; an image wired into a text-only model, and a size the 5B's VAE cannot
take, are refused at submit with 422 naming the model or the param."""

from __future__ import annotations

import io
import shutil
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient
from test_wan_server import mp4_frames, submit, wan_graph
from wan_harness import first_frame_image, reference_i2v_frames

from inline_core.config import Config
from inline_core.families.wan.kit import WanKit
from inline_core.runtime.video import decode_apng
from inline_core.server.app import create_app
from tests.server.server_support import LiveServer, post_run, wait_finished

TI2V = "wan2.2_ti2v_tiny_diffusers"
RENDER: dict[str, Any] = {"width": 64, "height": 32, "model": TI2V}


def png_bytes(width: int = 50, height: int = 40) -> bytes:
    buf = io.BytesIO()
    first_frame_image(width, height).save(buf, format="PNG")
    return buf.getvalue()


def upload(client: TestClient) -> str:
    response = client.post("/v1/assets", content=png_bytes(), headers={"content-type": "image/png"})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def test_image_to_video_take_is_the_i2v_pipelines_frames(
    client: TestClient, ti2v_reference: Any, i2v_reference: Any
) -> None:
    graph = wan_graph(image=upload(client), format="png", guidance=1.0, **RENDER)
    state = submit(client, graph)
    assert state["status"] == "done", state
    (take,) = state["takes"]
    assert take["kind"] == "video"
    assert take["params"]["image_to_video"] is True
    assert take["params"]["fps"] == 16  # the node's default
    frames = decode_apng(client.get(take["uri"]).content).astype(np.int16)
    image = first_frame_image(50, 40)
    ref = reference_i2v_frames(
        i2v_reference, ti2v_reference, image, guidance=1.0, width=64, height=32
    )
    # Within a level on a few values: the server's encode of the image runs on its own threads,
    # where the CPU's convolution kernels may block a reduction differently (a few ulps).
    assert int(np.abs(frames - ref).max()) <= 2
    assert float((frames != ref).mean()) <= 0.01


@pytest.mark.parametrize(
    ("params", "with_image", "names"),
    [
        ({"model": "wan2.1_t2v_tiny_diffusers"}, True, "'wan2.1_t2v_tiny_diffusers'"),
        ({"model": "wan2.1_t2v_tiny_fp32.safetensors"}, True, "text-to-video only"),
        ({**RENDER, "width": 48}, False, "'width' must be a multiple of 32"),
        ({**RENDER, "height": 80}, True, "'height' must be a multiple of 32"),
    ],
    ids=["image-into-t2v-folder", "image-into-t2v-file", "width-not-32", "height-not-32"],
)
def test_bad_wirings_and_sizes_are_refused_at_submit(
    client: TestClient, params: dict[str, Any], with_image: bool, names: str
) -> None:
    graph = wan_graph(image=upload(client) if with_image else None, **params)
    response = client.post("/v1/runs", json={"graph": graph, "target": "w"})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert names in error["message"] and error["nodeId"] == "w"
    assert client.get("/v1/runs").json()["runs"] == []  # nothing was stored


def test_live_server_renders_image_to_video(wan_live: LiveServer) -> None:
    live = wan_live  # the shared server (conftest.py)
    uploaded = httpx.post(
        f"{live.base}/v1/assets",
        content=png_bytes(),
        headers={"content-type": "image/png"},
        timeout=30,
    )
    assert uploaded.status_code == 201, uploaded.text
    image = str(uploaded.json()["id"])
    response = post_run(live, wan_graph(image=image, frames=5, **RENDER), "w")
    assert response.status_code == 201, response.text
    state = wait_finished(live, str(response.json()["runId"]), timeout=120)
    assert state["status"] == "done", live.log()
    (take,) = state["takes"]
    video = httpx.get(live.base + take["uri"], timeout=30)
    refused = post_run(live, wan_graph(image=image, model="wan2.1_t2v_tiny_diffusers"), "w")
    assert video.headers["content-type"] == "video/mp4"
    assert mp4_frames(video.content) == ("h264", "yuv420p", 5)
    assert refused.status_code == 422 and "text-to-video only" in refused.text


def test_a_clips_last_frame_starts_the_next(client: TestClient) -> None:
    """Wan 2.1 text-to-video -> `video/frame` (the last) -> the 5B's image-to-video: the second
    clip is what the same frame, uploaded as an image, renders."""
    first = wan_graph(format="png", model="wan2.1_t2v_tiny_diffusers", guidance=1.0)
    chained = wan_graph(format="png", guidance=1.0, **RENDER)
    clip = {**first["nodes"][1], "id": "c"}
    frame = {
        "id": "f",
        "type": "video/frame",
        "params": {"index": -1},
        "inputs": {"video": {"from": "c", "output": "video"}},
    }
    chained["nodes"][-1]["inputs"]["image"] = {"from": "f", "output": "image"}
    chained["nodes"] = [chained["nodes"][0], clip, frame, chained["nodes"][-1]]
    state = submit(client, chained)
    assert state["status"] == "done", state
    takes = {t["nodeId"]: t for t in state["takes"]}
    assert takes["f"]["kind"] == "image" and takes["w"]["kind"] == "video"
    last_frame = client.get(takes["f"]["uri"]).content
    clip_frames = decode_apng(client.get(takes["c"]["uri"]).content)
    assert np.array_equal(decode_apng(last_frame)[0], clip_frames[-1])
    uploaded = client.post("/v1/assets", content=last_frame, headers={"content-type": "image/png"})
    direct = submit(
        client, wan_graph(image=str(uploaded.json()["id"]), format="png", guidance=1.0, **RENDER)
    )
    (direct_take,) = direct["takes"]
    ours = decode_apng(client.get(takes["w"]["uri"]).content)
    assert np.array_equal(ours, decode_apng(client.get(direct_take["uri"]).content))


def test_a_vae_the_model_cannot_take_is_refused_naming_the_right_one(
    wan_kit: WanKit, tmp_path: Path
) -> None:
    """INLINE_WAN_VAE pointing the 5B at Wan 2.1's VAE: a 422 at submit saying which VAE it takes;
    with only Wan 2.1's VAE in the folder, the 5B's is model_missing naming where it goes."""
    assert wan_kit.vae_file is not None and wan_kit.ti2v_diffusion_file is not None
    assert wan_kit.text_encoder_file is not None and wan_kit.tokenizer_dir is not None
    models = tmp_path / "models"
    for folder in ("diffusion_models", "vae", "text_encoders"):
        (models / folder).mkdir(parents=True)
    shutil.copy(wan_kit.ti2v_diffusion_file, models / "diffusion_models")
    shutil.copy(wan_kit.vae_file, models / "vae")
    shutil.copy(wan_kit.text_encoder_file, models / "text_encoders")
    shutil.copytree(wan_kit.tokenizer_dir, models / "text_encoders" / wan_kit.tokenizer_dir.name)
    graph = wan_graph(width=64, height=32)
    for env, code, says in [
        ({}, "model_missing", "wan2.2_vae.safetensors"),
        ({"INLINE_WAN_VAE": str(models / "vae" / wan_kit.vae_file.name)}, "invalid_request",
         "takes 48: use wan2.2_vae.safetensors"),
    ]:  # fmt: skip
        config = Config(models_dir=models, data_dir=tmp_path / "data", profile="cpu", env=env)
        with TestClient(create_app(config)) as c:
            response = c.post("/v1/runs", json={"graph": graph, "target": "w"})
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["code"] == code and says in error["message"], error
