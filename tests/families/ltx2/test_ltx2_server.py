"""LTX-2 end to end through the HTTP API, in process (ASGI): a prompt graph renders a video take
with its soundtrack and an audio take, their facts served; bad params and missing pieces are
refused at submit with a 422 naming them."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import av
import pytest
from fastapi.testclient import TestClient

from inline_core.config import Config
from inline_core.families.ltx2.descriptor import NODE_TYPE
from inline_core.families.ltx2.kit import FOLDER, LTX2Kit
from inline_core.server.app import create_app
from tests.families.import_harness import finished
from tests.server.server_support import prompt_graph

RENDER: dict[str, Any] = {"width": 32, "height": 32, "frames": 9, "fps": 24, "steps": 2, "seed": 3}


def ltx2_graph(**params: Any) -> dict[str, Any]:
    return prompt_graph(NODE_TYPE, "l", {**RENDER, **params}, "waves on a pebble beach")


def test_a_render_makes_a_video_with_its_soundtrack_and_an_audio_take(client: TestClient) -> None:
    response = client.post("/v1/runs", json={"graph": ltx2_graph(), "target": "l"})
    assert response.status_code == 201, response.text
    state = finished(client, str(response.json()["runId"]), seconds=180)
    assert state["status"] == "done", state
    video, sound = state["takes"]
    assert (video["kind"], sound["kind"]) == ("video", "audio")
    assert video["contentType"] == "video/mp4" and sound["contentType"] == "audio/flac"
    assert video["frames"] == 9 and video["fps"] == 24
    assert video["sampleRate"] == sound["sampleRate"] == 16000
    assert video["channels"] == sound["channels"] == 2
    assert abs(sound["durationS"] - 9 / 24) < 0.1
    assert video["params"]["model"] == FOLDER  # "auto" picked the kit's folder
    data = client.get(video["uri"]).content
    with av.open(io.BytesIO(data), "r") as container:
        assert container.streams.video[0].codec_context.name == "h264"
        assert container.streams.audio[0].codec_context.name == "aac"
    assert client.get(sound["uri"]).headers["content-type"] == "audio/flac"


@pytest.mark.parametrize(
    ("params", "names"),
    [
        ({"frames": 4}, "'frames' must be 2k+1"),
        ({"width": 48}, "'width' must be a multiple of 32"),
        ({"format": "gif"}, "format"),
        ({"audio_format": "mp3"}, "audio_format"),
        ({"sampler": "euler_fancy"}, "sampler"),
        ({"schedule": "cosine"}, "schedule"),
        ({"steps": 1}, "'steps' must be at least 2"),
    ],
    ids=[
        "frames-the-vae-cannot-decode",
        "width",
        "unknown-format",
        "unknown-audio-format",
        "unknown-sampler",
        "unknown-schedule",
        "one-step-on-the-stretched-schedule",
    ],
)
def test_bad_params_are_refused_at_submit(
    client: TestClient, params: dict[str, Any], names: str
) -> None:
    response = client.post("/v1/runs", json={"graph": ltx2_graph(**params), "target": "l"})
    assert response.status_code == 422, response.text
    assert names in response.json()["error"]["message"]


def test_no_model_is_model_missing_saying_where_it_goes(tmp_path: Path) -> None:
    models = tmp_path / "models"
    (models / "diffusion_models").mkdir(parents=True)
    config = Config(models_dir=models, data_dir=tmp_path / "data", profile="cpu")
    with TestClient(create_app(config)) as client:
        response = client.post("/v1/runs", json={"graph": ltx2_graph(), "target": "l"})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "model_missing" and error["nodeId"] == "l"
    assert "diffusers LTX-2 folder" in error["message"]
    assert str(models / "diffusion_models") in error["message"]


def test_a_folder_without_its_vocoder_is_model_missing_naming_it(
    ltx2_kit: LTX2Kit, tmp_path: Path
) -> None:
    models = tmp_path / "models"
    folder = models / "diffusion_models" / FOLDER
    shutil.copytree(ltx2_kit.diffusers_dir, folder)
    shutil.rmtree(folder / "vocoder")
    config = Config(models_dir=models, data_dir=tmp_path / "data", profile="cpu")
    with TestClient(create_app(config)) as client:
        response = client.post("/v1/runs", json={"graph": ltx2_graph(), "target": "l"})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "model_missing"
    assert "vocoder" in error["message"] and "INLINE_LTX2_VOCODER" in error["message"]


def test_an_ltx_2_5_folder_is_refused_at_submit_saying_what_it_lacks(
    ltx2_kit: LTX2Kit, tmp_path: Path
) -> None:
    """LTX-2.5's text encoder is Gemma 4 and its video decoder a diffusion model: a folder with
    that encoder and no diffusion_decoder/ is a 422 model_missing before the run, naming it."""
    models = tmp_path / "models"
    folder = models / "diffusion_models" / FOLDER
    shutil.copytree(ltx2_kit.diffusers_dir, folder)
    config_path = folder / "text_encoder" / "config.json"
    encoder = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**encoder, "model_type": "gemma4_unified"}))
    config = Config(models_dir=models, data_dir=tmp_path / "data", profile="cpu")
    with TestClient(create_app(config)) as client:
        response = client.post("/v1/runs", json={"graph": ltx2_graph(), "target": "l"})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "model_missing"
    assert "LTX-2.5" in error["message"] and "diffusion_decoder/" in error["message"]


def test_a_lora_of_another_model_or_naming_is_422_at_submit(
    ltx2_kit: LTX2Kit, tmp_path: Path
) -> None:
    import torch

    from inline_core.diffusion.libs import save_safetensors

    folder = ltx2_kit.root / "loras"
    folder.mkdir(exist_ok=True)
    flux = folder / "flux_style_test.safetensors"  # there before the server scans
    unknown = folder / "sdxl_style_test.safetensors"
    pair = {"lora_A.weight": torch.zeros(2, 8), "lora_B.weight": torch.zeros(8, 2)}
    layer = "diffusion_model.double_blocks.0.img_attn.qkv"
    save_safetensors({f"{layer}.{k}": v for k, v in pair.items()}, flux)
    save_safetensors({f"lora_te1_text_model_fc1.{k}": v for k, v in pair.items()}, unknown)
    config = Config(
        models_dir=ltx2_kit.root, data_dir=tmp_path / "data", profile="cpu", dtype="float32"
    )
    try:
        with TestClient(create_app(config)) as client:
            for name, expected in (
                (flux.name, "is a LoRA for flux-2, not LTX-2"),
                (unknown.name, "fit none of their namings"),
            ):
                graph = ltx2_graph()
                graph["nodes"].insert(
                    0, {"id": "lo", "type": "input/lora", "params": {"name": name, "strength": 1}}
                )
                graph["nodes"][-1]["inputs"]["loras"] = [{"from": "lo", "output": "lora"}]
                response = client.post("/v1/runs", json={"graph": graph, "target": "l"})
                assert response.status_code == 422, response.text
                error = response.json()["error"]
                assert name in error["message"] and expected in error["message"], error
            assert client.get("/v1/runs").json()["runs"] == []  # nothing was queued
    finally:
        flux.unlink()
        unknown.unlink()
