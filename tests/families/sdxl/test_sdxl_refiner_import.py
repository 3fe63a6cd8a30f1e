"""ComfyUI's SDXL base + refiner template (two KSamplerAdvanced stages, each on its own
checkpoint) imports onto `stability/sdxl` with `refiner` and `refiner_switch = k / steps`, and the
imported graph renders what the node with those params renders; stages it cannot render as one
(another prompt on the refiner, a LoRA on the refiner) are refused naming why."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from test_sdxl_import import by_hand, rendered

from inline_core.families.sdxl.kit import SDXLKit
from tests.families.import_harness import import_comfy, target_of, template

BASE, REFINER = "sd_xl_base_1.0.safetensors", "sd_xl_refiner_1.0.safetensors"


def _models(kit: SDXLKit) -> dict[str, str]:
    assert kit.refiner is not None
    return {BASE: kit.checkpoint_name, REFINER: kit.refiner.name}


def refiner_graph(steps: int = 5, switch: int = 2) -> dict[str, Any]:
    """The template's chain in the API format, at a size a CPU test renders."""
    stage: dict[str, Any] = {"cfg": 5.5, "sampler_name": "euler", "scheduler": "normal",
                             "steps": steps}  # fmt: skip
    return {
        "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": BASE}},
        "12": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": REFINER}},
        "6": {"class_type": "CLIPTextEncode",
              "inputs": {"text": "a (lighthouse:1.2) at dusk", "clip": ["4", 1]}},
        "7": {"class_type": "CLIPTextEncode", "inputs": {"text": "blurry", "clip": ["4", 1]}},
        "15": {"class_type": "CLIPTextEncode",
               "inputs": {"text": "a (lighthouse:1.2) at dusk", "clip": ["12", 1]}},
        "16": {"class_type": "CLIPTextEncode", "inputs": {"text": "blurry", "clip": ["12", 1]}},
        "5": {"class_type": "EmptyLatentImage",
              "inputs": {"width": 72, "height": 64, "batch_size": 1}},
        "10": {"class_type": "KSamplerAdvanced",
               "inputs": {**stage, "add_noise": "enable", "noise_seed": 9, "start_at_step": 0,
                          "end_at_step": switch, "return_with_leftover_noise": "enable",
                          "model": ["4", 0], "positive": ["6", 0], "negative": ["7", 0],
                          "latent_image": ["5", 0]}},
        "11": {"class_type": "KSamplerAdvanced",
               "inputs": {**stage, "add_noise": "disable", "noise_seed": 0,
                          "start_at_step": switch, "end_at_step": 10000,
                          "return_with_leftover_noise": "disable", "model": ["12", 0],
                          "positive": ["15", 0], "negative": ["16", 0],
                          "latent_image": ["10", 0]}},
        "17": {"class_type": "VAEDecode", "inputs": {"samples": ["11", 0], "vae": ["12", 2]}},
        "19": {"class_type": "SaveImage",
               "inputs": {"images": ["17", 0], "filename_prefix": "ComfyUI"}},
    }  # fmt: skip


def test_the_official_refiner_template_imports_with_the_refiner_params(
    client: TestClient, sdxl_kit: SDXLKit
) -> None:
    response = import_comfy(client, template("sdxl_simple_example.json"), _models(sdxl_kit))
    assert response.status_code == 200, response.text
    body = response.json()
    target, _nodes = target_of(body)
    assert target["type"] == "stability/sdxl"
    params = target["params"]
    assert sdxl_kit.refiner is not None
    expected = {"model": sdxl_kit.checkpoint_name, "refiner": sdxl_kit.refiner.name,
                "refiner_switch": 0.8, "steps": 25, "guidance": 8.0, "sampler": "euler",
                "schedule": "normal", "width": 1024, "height": 1024}  # fmt: skip
    assert {k: params[k] for k in expected} == expected
    assert params["negative_prompt"] == "text, watermark"
    assert body["changesPicture"] == []


def test_the_refiner_chain_renders_what_the_node_with_its_params_renders(
    client: TestClient, sdxl_kit: SDXLKit
) -> None:
    response = import_comfy(client, refiner_graph(), _models(sdxl_kit))
    assert response.status_code == 200, response.text
    body = response.json()
    target, _nodes = target_of(body)
    assert target["params"]["refiner_switch"] == 0.4
    imported, take = rendered(client, body["graph"], body["target"])
    assert sdxl_kit.refiner is not None
    written = {"refiner": sdxl_kit.refiner.name, "refiner_switch": 0.4, "steps": 5,
               "sampler": "euler", "schedule": "normal"}  # fmt: skip
    hand, _ = rendered(client, by_hand(sdxl_kit, **written), "w")
    assert np.array_equal(imported, hand)
    assert take["params"]["refiner_switch"] == 0.4
    plain = by_hand(sdxl_kit, steps=5, sampler="euler", schedule="normal")
    alone, _ = rendered(client, plain, "w")
    assert not np.array_equal(imported, alone)  # the refiner's steps are in the picture


def _lora_on_refiner(graph: dict[str, Any], kit: SDXLKit) -> None:
    graph["30"] = {"class_type": "LoraLoaderModelOnly",
                   "inputs": {"lora_name": kit.loras["a"].name, "strength_model": 1.0,
                              "model": ["12", 0]}}  # fmt: skip
    graph["11"]["inputs"]["model"] = ["30", 0]


def _other_prompt(graph: dict[str, Any], _kit: SDXLKit) -> None:
    graph["15"]["inputs"]["text"] = "a castle"


@pytest.mark.parametrize(
    ("change", "said"),
    [(_lora_on_refiner, "adapts the refiner"), (_other_prompt, "is not the base stage's")],
    ids=["lora-on-refiner", "other-prompt"],
)
def test_stages_the_node_cannot_render_as_one_are_refused(
    client: TestClient, sdxl_kit: SDXLKit, change: Any, said: str
) -> None:
    graph = refiner_graph()
    change(graph, sdxl_kit)
    response = import_comfy(client, graph, _models(sdxl_kit))
    assert response.status_code == 422, response.text
    message = response.json()["error"]["message"]
    assert said in message and "KSamplerAdvanced" in message


def test_an_ancestral_refiner_stage_on_its_own_seed_is_listed(
    client: TestClient, sdxl_kit: SDXLKit
) -> None:
    graph = refiner_graph()
    for stage in ("10", "11"):
        graph[stage]["inputs"]["sampler_name"] = "euler_ancestral"
    response = import_comfy(client, graph, _models(sdxl_kit))
    assert response.status_code == 200, response.text
    (change,) = response.json()["changesPicture"]
    assert "noise_seed 0" in str(change) and "KSamplerAdvanced 10's 9" in str(change)
