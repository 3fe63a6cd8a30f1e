"""Krea 2 through the HTTP API (in process): a prompt graph renders from a diffusers folder with
ComfyUI's Qwen-Image VAE file; missing pieces and a Krea single file that cannot be read are
refused at submit naming what to do; a LoRA renders per request, and one in another naming is a
422 naming it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from inline_core.config import Config
from inline_core.diffusion.libs import save_safetensors
from inline_core.families.krea2.descriptor import NODE_TYPE
from inline_core.families.krea2.kit import Krea2Kit, build_kit
from inline_core.server.app import create_app
from tests.families.import_harness import finished
from tests.server.server_support import prompt_graph

RENDER: dict[str, Any] = {"width": 64, "height": 64, "steps": 2, "seed": 5}


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> Krea2Kit:
    return build_kit(tmp_path_factory.mktemp("krea2_server") / "models")


def graph(**params: Any) -> dict[str, Any]:
    return prompt_graph(NODE_TYPE, "k", {**RENDER, **params}, "a fox")


def refused(client: TestClient, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/v1/runs", json={"graph": body, "target": "k"})
    assert response.status_code == 422, response.text
    return dict(response.json()["error"])


def test_renders_and_refuses_what_it_cannot_read(kit: Krea2Kit, tmp_path: Path) -> None:
    single = kit.root / "diffusion_models" / "krea2_raw.safetensors"
    save_safetensors({"txtfusion.projector.weight": _tensor()}, single)
    config = Config(models_dir=kit.root, data_dir=tmp_path / "data", profile="cpu", dtype="float32")
    try:
        with TestClient(create_app(config)) as client:
            body = graph(model="krea2_tiny_diffusers", vae="krea2_tiny_qwen_image_vae.safetensors")
            response = client.post("/v1/runs", json={"graph": body, "target": "k"})
            assert response.status_code == 201, response.text
            run_id = response.json()["runId"]
            state = finished(client, run_id)
            assert state["status"] == "done", state
            error = refused(client, graph(model=single.name))
            assert "cannot be read" in error["message"], error
    finally:
        single.unlink()
    alone = tmp_path / "alone"
    shutil.copytree(kit.diffusers_dir / "transformer", alone / "diffusion_models" / "krea_t")
    config = Config(models_dir=alone, data_dir=tmp_path / "data2", profile="cpu", dtype="float32")
    with TestClient(create_app(config)) as client:
        error = refused(client, graph())
        assert error["code"] == "model_missing", error
        assert "qwen_image_vae.safetensors" in error["message"] and "Qwen3-VL" in error["message"]


def _tensor() -> Any:
    import torch

    return torch.zeros(4, 4)


def with_lora(body: dict[str, Any], name: str, strength: float) -> dict[str, Any]:
    """`body` with one `input/lora` node on the Krea 2 node's `loras` input."""
    body["nodes"].insert(
        0, {"id": "l", "type": "input/lora", "params": {"name": name, "strength": strength}}
    )
    body["nodes"][-1]["inputs"]["loras"] = [{"from": "l", "output": "lora"}]
    return body


def test_loras_render_per_request_and_another_naming_is_422(kit: Krea2Kit, tmp_path: Path) -> None:
    unknown = kit.root / "loras" / "sdxl_style_test.safetensors"  # there before the server scans
    save_safetensors({"lora_unet_down_blocks_0.lora_down.weight": _tensor()}, unknown)
    config = Config(models_dir=kit.root, data_dir=tmp_path / "data", profile="cpu", dtype="float32")
    try:
        with TestClient(create_app(config)) as client:
            name = kit.loras["b-krea"].name
            body = with_lora(graph(model="krea2_tiny.safetensors"), name, 0.8)
            response = client.post("/v1/runs", json={"graph": body, "target": "k"})
            assert response.status_code == 201, response.text
            run_id = response.json()["runId"]
            state = finished(client, run_id)
            assert state["status"] == "done", state
            (take,) = state["takes"]
            assert take["params"]["loras"] == [{"name": name, "strength": 0.8}]
            error = refused(client, with_lora(graph(), unknown.name, 1.0))
            assert "Krea 2" in error["message"] and unknown.name in error["message"], error
    finally:
        unknown.unlink()
