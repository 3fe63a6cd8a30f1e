"""A ComfyUI Wan workflow with LoRA loaders on the model's way imports onto `alibaba/wan` with one
`input/lora` node per loader on its `loras` input, and renders the hand-written graph's frames."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from test_wan_import import import_comfy, rendered_alike, small_workflow
from test_wan_lora_server import with_loras
from test_wan_server import wan_graph

from inline_core.families.wan.kit import WanKit

T2V_FILE = "wan2.1_t2v_tiny_fp32.safetensors"


def with_lora_loaders(kit: WanKit) -> dict[str, Any]:
    """The small Wan chain on Wan 2.1, with UNETLoader -> LoraLoaderModelOnly -> LoraLoader ->
    ModelSamplingSD3 (the LoraLoader's CLIP half feeding the prompts)."""
    workflow = small_workflow(None)
    workflow["37"]["inputs"]["unet_name"] = "wan2.1_t2v_1.3B_fp16.safetensors"
    workflow["39"]["inputs"]["vae_name"] = "wan_2.1_vae.safetensors"  # Wan 2.1's VAE
    workflow["55"] = {
        "class_type": "EmptyHunyuanLatentVideo",
        "inputs": {"width": 48, "height": 32, "length": 9, "batch_size": 1},
    }
    workflow["70"] = {
        "class_type": "LoraLoaderModelOnly",
        "inputs": {"lora_name": kit.loras["a-comfy"].name, "strength_model": 0.8,
                   "model": ["37", 0]},
    }  # fmt: skip
    workflow["71"] = {
        "class_type": "LoraLoader",
        "inputs": {"lora_name": kit.loras["b"].name, "strength_model": 1.5,
                   "strength_clip": 1.0, "model": ["70", 0], "clip": ["38", 0]},
    }  # fmt: skip
    workflow["48"]["inputs"]["model"] = ["71", 0]
    for prompt in ("6", "7"):
        workflow[prompt]["inputs"]["clip"] = ["71", 1]
    return workflow


def test_imported_wan_lora_loaders_render_the_hand_written_graphs_frames(
    client: TestClient, wan_kit: WanKit
) -> None:
    response = import_comfy(client, with_lora_loaders(wan_kit))
    assert response.status_code == 200, response.text
    body = response.json()
    nodes = {n["id"]: n for n in body["graph"]["nodes"]}
    target = nodes[body["target"]]
    stack = [(wan_kit.loras["a-comfy"].name, 0.8), (wan_kit.loras["b"].name, 1.5)]
    loras = [nodes[edge["from"]] for edge in target["inputs"]["loras"]]
    assert [(n["type"], n["params"]["name"], n["params"]["strength"]) for n in loras] == [
        ("input/lora", name, strength) for name, strength in stack
    ]
    [change] = body["changesPicture"]
    assert change["classType"] == "LoraLoader" and "strength_clip" in change["reason"]
    skipped = {s["classType"] for s in body["skipped"]}
    assert "LoraLoader" not in skipped and "LoraLoaderModelOnly" not in skipped
    by_hand = wan_graph(
        "a paper boat on a rainy street",
        model=T2V_FILE,
        width=48,
        height=32,
        frames=9,
        fps=24,
        steps=3,
        guidance=3.0,
        shift=6.0,
        sampler="uni_pc",  # the KSampler's names, one to one
        schedule="simple",
        negative_prompt="blurry",
        format="png",
        vae="wan_2.1_vae_tiny.safetensors",  # the workflow's files, as the import names them
        text_encoder="umt5_tiny_fp32.safetensors",
    )
    # The same frames, rendered one after the other (`rendered_alike`), each with the stack.
    for take in rendered_alike(client, body, with_loras(by_hand, stack)):
        assert take["params"]["loras"] == [{"name": n, "strength": s} for n, s in stack]
