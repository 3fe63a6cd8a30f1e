"""ComfyUI's Krea 2 workflows import onto `krea/krea-2` (through `POST /v1/import/comfy`, the
family's recipe in its package): the official Turbo template, whose prompt a model writes as it
runs (its TextGenerate enhancer, on), is refused naming that node; with the enhancer switched
off it imports as one node (cfg in Krea's count, the prompt read through PreviewAny) and, cut
down for a CPU, renders the pixels the graph written by hand renders. The style-reference
template is refused naming the node it cannot run; a base model's schedule is said to differ."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from inline_core.config import Config
from inline_core.families.krea2.descriptor import NODE_TYPE
from inline_core.families.krea2.kit import Krea2Kit
from inline_core.server.app import create_app
from tests.families.import_harness import target_of, template
from tests.server.server_support import prompt_graph
from tests.server.test_qwen_image_import import rendered

Json = dict[str, Any]
TURBO = "krea2_tiny_turbo.safetensors"  # the kit's model, Turbo by its name as Krea's files are
ENCODER = "qwen3vl_tiny.safetensors"
VAE = "krea2_tiny_qwen_image_vae.safetensors"
MODELS = {
    "krea2_turbo_fp8_scaled.safetensors": TURBO,
    "krea2_raw_bf16.safetensors": TURBO,
    "qwen3vl_4b_fp8_scaled.safetensors": ENCODER,
    "qwen_image_vae.safetensors": VAE,
}
SMALL: Json = {"width": 64, "height": 64, "steps": 2}


@pytest.fixture(scope="module")
def client(krea2_kit: Krea2Kit, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    root = tmp_path_factory.mktemp("krea2_import")
    models = root / "models"
    for category, source, name in (
        ("diffusion_models", krea2_kit.transformer_file, TURBO),
        ("text_encoders", krea2_kit.text_encoder_file, ENCODER),
        ("vae", krea2_kit.vae_file, VAE),
    ):
        (models / category).mkdir(parents=True)
        shutil.copy(source, models / category / name)
    config = Config(models_dir=models, data_dir=root / "data", profile="cpu", dtype="float32")
    with TestClient(create_app(config)) as c:
        yield c


def import_comfy(client: TestClient, workflow: Any) -> Any:
    return client.post("/v1/import/comfy", json={"workflow": workflow, "models": MODELS})


def without_enhancer() -> Any:
    """The official Turbo template with its prompt enhancer switched off (its second promoted
    widget), as a user renders their own prompt."""
    workflow = template("image_krea2_turbo_t2i.json")
    (instance,) = [n for n in workflow["nodes"] if n["id"] == 30]
    assert instance["widgets_values"][1] is True
    instance["widgets_values"][1] = False
    return workflow


def test_the_official_template_is_refused_naming_its_prompt_enhancer(client: TestClient) -> None:
    for name in ("image_krea2_turbo_t2i.json", "image_krea2_turbo_t2i_int8.json"):
        response = import_comfy(client, template(name))
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["code"] == "unsupported_node"
        assert "TextGenerate 30:16, which only running the workflow decides" in error["message"]
    style = import_comfy(client, template("image_krea2_turbo_int8_image_style_reference.json"))
    assert style.status_code == 422, style.text
    assert "FluxKontextMultiReferenceLatentMethod" in style.json()["error"]["message"]


def test_with_the_enhancer_off_it_renders_the_hand_written_graphs_pixels(
    client: TestClient,
) -> None:
    response = import_comfy(client, without_enhancer())
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["family"] == {"name": "krea-2", "title": "Krea 2"}
    target, nodes = target_of(body)
    assert target["type"] == NODE_TYPE
    expected = {
        **{"steps": 8, "guidance": 0.0, "sampler": "euler", "schedule": "simple"},
        **{"negative_prompt": "", "model": TURBO, "vae": VAE, "text_encoder": ENCODER},
    }
    assert {k: target["params"][k] for k in expected} == expected
    prompt = nodes[target["inputs"]["prompt"]["from"]]["params"]["text"]
    assert prompt.startswith("A high-resolution, surreal digital illustration")
    assert "loras" not in target["inputs"]  # its style LoRA's switch is off
    assert body["changesPicture"] == []
    target["params"].update(SMALL)
    imported = rendered(client, body["graph"], body["target"])
    params = {k: target["params"][k] for k in ("seed", "guidance", "model", "vae", "text_encoder")}
    written = prompt_graph(NODE_TYPE, "k", {**params, **SMALL}, prompt)
    assert np.array_equal(imported, rendered(client, written, "k"))
    assert imported.std() > 1.0


def test_cfg_counts_as_krea_does_and_a_base_models_schedule_is_said(client: TestClient) -> None:
    workflow: Json = {
        "1": {"class_type": "UNETLoader", "inputs": {"unet_name": "krea2_raw_bf16.safetensors"}},
        "2": {"class_type": "CLIPLoader",
              "inputs": {"clip_name": "qwen3vl_4b_fp8_scaled.safetensors", "type": "krea2"}},
        "3": {"class_type": "VAELoader", "inputs": {"vae_name": "qwen_image_vae.safetensors"}},
        "4": {"class_type": "CLIPTextEncode", "inputs": {"text": "a heron", "clip": ["2", 0]}},
        "5": {"class_type": "CLIPTextEncode", "inputs": {"text": "blurry", "clip": ["2", 0]}},
        "6": {"class_type": "EmptyLatentImage",
              "inputs": {"width": 64, "height": 64, "batch_size": 1}},
        "7": {"class_type": "KSampler",
              "inputs": {"seed": 4, "steps": 28, "cfg": 4.5, "sampler_name": "euler",
                         "scheduler": "beta", "denoise": 1.0, "model": ["1", 0],
                         "positive": ["4", 0], "negative": ["5", 0], "latent_image": ["6", 0]}},
        "8": {"class_type": "VAEDecode", "inputs": {"samples": ["7", 0], "vae": ["3", 0]}},
        "9": {"class_type": "SaveImage", "inputs": {"images": ["8", 0]}},
    }  # fmt: skip
    response = import_comfy(client, workflow)
    assert response.status_code == 200, response.text
    body = response.json()
    target, _nodes = target_of(body)
    assert target["params"]["guidance"] == 3.5  # cond + 3.5 (cond - uncond): ComfyUI's cfg 4.5
    assert target["params"]["schedule"] == "beta"
    assert target["params"]["negative_prompt"] == "blurry"
    (change,) = body["changesPicture"]
    assert change["classType"] == "KSampler" and "not by ComfyUI's fixed 1.15" in change["reason"]
    workflow["7"]["inputs"]["cfg"] = 0.5
    refused = import_comfy(client, workflow)
    assert refused.status_code == 422 and "cfg 0.5 is not offered" in refused.text
