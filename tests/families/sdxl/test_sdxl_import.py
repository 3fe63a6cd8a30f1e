"""ComfyUI's SDXL workflows import onto `stability/sdxl` (`POST /v1/import/comfy`): the official
SDXL template and the classic default graph (CheckpointLoaderSimple -> CLIPTextEncode x2 ->
EmptyLatentImage -> KSampler -> VAEDecode -> SaveImage) become one node with the workflow's
params, and the imported graph renders the pixels of the graph written by hand, LoraLoader
chains (both strengths) and CLIPSetLastLayer included. The checkpoint is recognised by its keys,
whatever its name; a checkpoint of a family this server does not run is refused naming it (the
base + refiner template: `test_sdxl_refiner_import.py`)."""

from __future__ import annotations

import io
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image
from sdxl_harness import rekeyed_checkpoint, sd15_like
from test_sdxl_server import sdxl_graph, with_lora

from inline_core.config import Config
from inline_core.families.sdxl.kit import SDXLKit
from inline_core.server.app import create_app
from tests.families.import_harness import import_comfy, takes_of, target_of, template

BASE = "sd_xl_base_1.0.safetensors"


def default_graph(checkpoint: str) -> dict[str, Any]:
    """ComfyUI's classic default graph in the API format, at a size a CPU test renders."""
    return {
        "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": checkpoint}},
        "6": {"class_type": "CLIPTextEncode",
              "inputs": {"text": "a (lighthouse:1.2) at dusk", "clip": ["4", 1]}},
        "7": {"class_type": "CLIPTextEncode", "inputs": {"text": "blurry", "clip": ["4", 1]}},
        "5": {"class_type": "EmptyLatentImage",
              "inputs": {"width": 72, "height": 64, "batch_size": 1}},
        "3": {"class_type": "KSampler",
              "inputs": {"seed": 9, "steps": 3, "cfg": 5.5, "sampler_name": "dpmpp_2m",
                         "scheduler": "karras", "denoise": 1.0, "model": ["4", 0],
                         "positive": ["6", 0], "negative": ["7", 0], "latent_image": ["5", 0]}},
        "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["4", 2]}},
        "9": {"class_type": "SaveImage",
              "inputs": {"images": ["8", 0], "filename_prefix": "ComfyUI"}},
    }  # fmt: skip


def by_hand(kit: SDXLKit, **params: Any) -> dict[str, Any]:
    written: dict[str, Any] = {"model": kit.checkpoint_name, "negative_prompt": "blurry",
                               "width": 72, "height": 64, "steps": 3, "guidance": 5.5, "seed": 9,
                               "sampler": "dpmpp_2m", "schedule": "karras"}  # fmt: skip
    graph = sdxl_graph("a (lighthouse:1.2) at dusk", **(written | params))
    graph["nodes"][-1]["id"] = "w"
    return graph


def rendered(client: TestClient, graph: dict[str, Any], target: str) -> tuple[Any, Any]:
    (take,) = takes_of(client, [(graph, target)])
    with Image.open(io.BytesIO(client.get(take["uri"]).content)) as image:
        return np.asarray(image.convert("RGB")).astype(np.int16), take


def test_the_official_sdxl_template_imports_as_one_sdxl_node(
    client: TestClient, sdxl_kit: SDXLKit
) -> None:
    response = import_comfy(
        client, template("image_sdxl_simple.json"), {BASE: sdxl_kit.checkpoint_name}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    target, _nodes = target_of(body)
    assert target["type"] == "stability/sdxl"
    params = target["params"]
    expected = {"model": sdxl_kit.checkpoint_name, "width": 1024, "height": 1024, "steps": 25,
                "guidance": 7.0, "sampler": "dpmpp_2m", "schedule": "karras"}  # fmt: skip
    assert {k: params[k] for k in expected} == expected
    assert params["negative_prompt"].startswith("color, colored, lowres")
    assert body["changesPicture"] == []


def test_the_default_graph_renders_what_the_graph_by_hand_renders(
    client: TestClient, sdxl_kit: SDXLKit
) -> None:
    response = import_comfy(client, default_graph(BASE), {BASE: sdxl_kit.checkpoint_name})
    assert response.status_code == 200, response.text
    body = response.json()
    imported, _take = rendered(client, body["graph"], body["target"])
    hand, _ = rendered(client, by_hand(sdxl_kit), "w")
    assert np.array_equal(imported, hand)


@pytest.mark.parametrize(
    ("widget", "name", "closest"),
    [("sampler_name", "dpm_fast", "dpm_2"), ("scheduler", "align_your_steps", "linear_quadratic")],
)
def test_a_sampler_or_scheduler_sdxl_does_not_run_is_refused_naming_the_closest(
    client: TestClient, sdxl_kit: SDXLKit, widget: str, name: str, closest: str
) -> None:
    """One to one: a KSampler name the node does not offer is a 422 naming it and the closest,
    never euler or `normal` in its place."""
    workflow = default_graph(BASE)
    workflow["3"]["inputs"][widget] = name
    response = import_comfy(client, workflow, {BASE: sdxl_kit.checkpoint_name})
    assert response.status_code == 422, response.text
    message = response.json()["error"]["message"]
    assert repr(name) in message and "KSampler 3" in message
    assert f"the closest offered is {closest!r}" in message and "Nothing is swapped" in message


def test_lora_loaders_and_clip_set_last_layer_import_with_both_strengths(
    client: TestClient, sdxl_kit: SDXLKit
) -> None:
    workflow = default_graph(BASE)
    a, b = sdxl_kit.loras["a"].name, sdxl_kit.loras["b"].name
    workflow["10"] = {"class_type": "LoraLoader",
                      "inputs": {"lora_name": a, "strength_model": 0.8, "strength_clip": 1.2,
                                 "model": ["4", 0], "clip": ["4", 1]}}  # fmt: skip
    workflow["11"] = {"class_type": "LoraLoaderModelOnly",
                      "inputs": {"lora_name": b, "strength_model": 0.5,
                                 "model": ["10", 0]}}  # fmt: skip
    workflow["12"] = {"class_type": "CLIPSetLastLayer",
                      "inputs": {"stop_at_clip_layer": -1, "clip": ["10", 1]}}  # fmt: skip
    workflow["3"]["inputs"]["model"] = ["11", 0]
    for prompt in ("6", "7"):
        workflow[prompt]["inputs"]["clip"] = ["12", 0]
    response = import_comfy(client, workflow, {BASE: sdxl_kit.checkpoint_name})
    assert response.status_code == 200, response.text
    body = response.json()
    target, nodes = target_of(body)
    loras = [nodes[edge["from"]]["params"] for edge in target["inputs"]["loras"]]
    assert [(p["name"], p["strength"], p["strength_clip"]) for p in loras] == [
        (a, 0.8, 1.2),
        (b, 0.5, 0.0),
    ]
    assert target["params"]["clip_skip"] == -1 and body["changesPicture"] == []
    imported, take = rendered(client, body["graph"], body["target"])
    graph = with_lora(by_hand(sdxl_kit, clip_skip=-1), name=a, strength=0.8, strength_clip=1.2)
    graph["nodes"].insert(
        0, {"id": "l2", "type": "input/lora", "params": {"name": b, "strength": 0.5,
                                                         "strength_clip": 0.0}}
    )  # fmt: skip
    graph["nodes"][-1]["inputs"]["loras"].append({"from": "l2", "output": "lora"})
    hand, _ = rendered(client, graph, "w")
    assert take["params"]["loras"][0] == {"name": a, "strength": 0.8, "strength_clip": 1.2}
    # Within a level: a fused copy of the stack rounds apart from per-row deltas.
    assert int(np.abs(imported - hand).max()) <= 1


def test_a_checkpoint_is_recognised_by_its_keys_not_its_name(
    sdxl_kit: SDXLKit, tmp_path: Path
) -> None:
    assert sdxl_kit.checkpoint is not None
    models = tmp_path / "models"
    shutil.copytree(sdxl_kit.root, models, ignore=shutil.ignore_patterns("*diffusers*"))
    shutil.copy(sdxl_kit.checkpoint, models / "checkpoints" / "my_favourite_mix.safetensors")
    config = Config(models_dir=models, data_dir=tmp_path / "data", profile="cpu")
    with TestClient(create_app(config)) as client:
        response = import_comfy(client, default_graph("my_favourite_mix.safetensors"), {})
    assert response.status_code == 200, response.text
    target, _nodes = target_of(response.json())
    assert target["type"] == "stability/sdxl"
    assert target["params"]["model"] == "my_favourite_mix.safetensors"


@pytest.mark.parametrize(
    "name",
    ["v1-5-pruned-emaonly.safetensors", "my_mix_v3.safetensors", "juggernautXL_v9.safetensors"],
    ids=["sd15-name", "unknown-name", "sdxl-name"],
)
def test_a_checkpoint_of_a_family_not_served_is_refused_naming_it(
    sdxl_kit: SDXLKit, tmp_path: Path, name: str
) -> None:
    """An SD 1.x/2.x-like checkpoint is no SDXL model by its keys, whatever its name (one no
    family claims, or an SDXL one), nor SD 1.5's (its projections are linear, SD 2.x's): the
    import refuses it naming the family its keys are of and what they look like."""
    models = tmp_path / "models"
    sd15_like(sdxl_kit, models, name)
    config = Config(models_dir=models, data_dir=tmp_path / "data", profile="cpu")
    with TestClient(create_app(config)) as client:
        response = import_comfy(client, default_graph(name), {})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "unsupported_model_family"
    assert "Stable Diffusion 1.5" in error["message"]
    assert f"checkpoints/{name}'s keys look like" in error["message"]
    assert "without SDXL's label_emb" in error["message"] or "no label_emb" in error["message"]


def test_a_checkpoint_no_family_knows_is_refused_with_its_keys_outline(
    sdxl_kit: SDXLKit, tmp_path: Path
) -> None:
    """A checkpoint whose diffusion model is no family's known here: the refusal outlines its
    keys rather than guessing a family."""
    models = tmp_path / "models"
    mystery = "model.diffusion_model.mystery_blocks."
    rekeyed_checkpoint(
        sdxl_kit,
        models,
        "mystery.safetensors",
        lambda k: k.replace("model.diffusion_model.", mystery),
    )
    config = Config(models_dir=models, data_dir=tmp_path / "data", profile="cpu")
    with TestClient(create_app(config)) as client:
        response = import_comfy(client, default_graph("mystery.safetensors"), {})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "unsupported_model_family"
    assert "checkpoints/mystery.safetensors's keys look like mystery_blocks.*" in error["message"]
    assert "SDXL" in error["message"]  # what this server runs
