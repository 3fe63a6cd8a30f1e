"""ComfyUI's hires fix (KSampler -> LatentUpscale / LatentUpscaleBy -> KSampler at a denoise
below 1) imports onto `stability/sdxl`'s hires params and renders what diffusers renders by hand
(`test_sdxl_hires.py`'s reference: the base pipeline's latents, torch's interpolate, the
img2img pipeline); a second seed is listed in `changesPicture`, and chains the node cannot render
as one are refused naming why."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sdxl_harness import max_diff
from test_sdxl_hires import hires_reference
from test_sdxl_import import rendered

from inline_core.families.sdxl.kit import SDXLKit
from tests.families.import_harness import import_comfy, target_of

BASE = "sd_xl_base_1.0.safetensors"
PROMPT = "a lighthouse at dusk"
TOLERANCE = 2  # levels of 255: the CFG rows batched as two where diffusers runs one batch


def hires_graph(upscale: dict[str, Any], second_seed: int = 9) -> dict[str, Any]:
    """The classic two-pass chain in the API format, at a size a CPU test renders."""
    sampling: dict[str, Any] = {"cfg": 5.5, "sampler_name": "euler", "scheduler": "ddim_uniform"}
    sampling |= {"model": ["4", 0], "positive": ["6", 0], "negative": ["7", 0]}
    return {
        "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": BASE}},
        "6": {"class_type": "CLIPTextEncode", "inputs": {"text": PROMPT, "clip": ["4", 1]}},
        "7": {"class_type": "CLIPTextEncode", "inputs": {"text": "blurry", "clip": ["4", 1]}},
        "5": {"class_type": "EmptyLatentImage",
              "inputs": {"width": 64, "height": 64, "batch_size": 1}},
        "3": {"class_type": "KSampler",
              "inputs": {**sampling, "seed": 9, "steps": 3, "denoise": 1.0,
                         "latent_image": ["5", 0]}},
        "10": {"class_type": upscale["class_type"], "inputs": {**upscale["inputs"],
               "samples": ["3", 0]}},
        "11": {"class_type": "KSampler",
               "inputs": {**sampling, "seed": second_seed, "steps": 2, "denoise": 0.5,
                          "latent_image": ["10", 0]}},
        "8": {"class_type": "VAEDecode", "inputs": {"samples": ["11", 0], "vae": ["4", 2]}},
        "9": {"class_type": "SaveImage",
              "inputs": {"images": ["8", 0], "filename_prefix": "ComfyUI"}},
    }  # fmt: skip


BY = {"class_type": "LatentUpscaleBy", "inputs": {"upscale_method": "bilinear", "scale_by": 1.5}}


def test_the_hires_chain_imports_and_renders_diffusers_by_hand(
    client: TestClient, sdxl_kit: SDXLKit, sdxl_reference: Any
) -> None:
    response = import_comfy(client, hires_graph(BY), {BASE: sdxl_kit.checkpoint_name})
    assert response.status_code == 200, response.text
    body = response.json()
    target, _nodes = target_of(body)
    expected = {"width": 64, "height": 64, "steps": 3, "seed": 9, "sampler": "euler",
                "schedule": "ddim_uniform", "hires_width": 96, "hires_height": 96,
                "hires_steps": 2, "hires_denoise": 0.5, "hires_method": "bilinear"}  # fmt: skip
    assert {k: target["params"][k] for k in expected} == expected
    assert body["changesPicture"] == []
    imported, _take = rendered(client, body["graph"], body["target"])
    params = {k: v for k, v in expected.items()} | {"guidance": 5.5, "negative_prompt": "blurry"}
    reference = hires_reference(sdxl_reference, PROMPT, **params)
    assert max_diff(imported, reference) <= TOLERANCE


@pytest.mark.parametrize(
    ("upscale", "size", "method"),
    [
        ({"upscale_method": "area", "width": 128, "height": 0, "crop": "disabled"}, (128, 128),
         "area"),
        ({"upscale_method": "bicubic", "width": 100, "height": 72, "crop": "disabled"}, (96, 72),
         "bicubic"),
        ({"upscale_method": "bilinear", "width": 0, "height": 0, "crop": "disabled"}, (64, 64),
         "nearest-exact"),
        ({"upscale_method": "nearest-exact", "width": 96, "height": 96, "crop": "center"},
         (96, 96), "nearest-exact"),
    ],
    ids=["width-only", "rounded-down", "no-upscale", "centre-same-aspect"],
)  # fmt: skip
def test_latent_upscale_sizes_follow_comfyuis_arithmetic(
    client: TestClient, sdxl_kit: SDXLKit, upscale: dict[str, Any], size: Any, method: str
) -> None:
    graph = hires_graph({"class_type": "LatentUpscale", "inputs": upscale})
    response = import_comfy(client, graph, {BASE: sdxl_kit.checkpoint_name})
    assert response.status_code == 200, response.text
    params = target_of(response.json())[0]["params"]
    assert (params["hires_width"], params["hires_height"]) == size
    assert params["hires_method"] == method


def test_a_second_seed_is_listed_as_changing_the_picture(
    client: TestClient, sdxl_kit: SDXLKit
) -> None:
    response = import_comfy(
        client, hires_graph(BY, second_seed=4), {BASE: sdxl_kit.checkpoint_name}
    )
    assert response.status_code == 200, response.text
    (change,) = response.json()["changesPicture"]
    assert "its seed 4" in str(change) and "KSampler 3's 9" in str(change)


def _bislerp(graph: dict[str, Any]) -> None:
    graph["10"]["inputs"]["upscale_method"] = "bislerp"


def _other_cfg(graph: dict[str, Any]) -> None:
    graph["11"]["inputs"]["cfg"] = 7.0


def _other_prompt(graph: dict[str, Any]) -> None:
    graph["12"] = {"class_type": "CLIPTextEncode", "inputs": {"text": "a castle", "clip": ["4", 1]}}
    graph["11"]["inputs"]["positive"] = ["12", 0]


def _crop(graph: dict[str, Any]) -> None:
    graph["10"] = {"class_type": "LatentUpscale",
                   "inputs": {"upscale_method": "bilinear", "width": 128, "height": 64,
                              "crop": "center", "samples": ["3", 0]}}  # fmt: skip


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (_bislerp, "'bislerp' (ComfyUI's own spherical blend"),
        (_other_cfg, "its cfg is not KSampler 3's"),
        (_other_prompt, "its positive prompt 'a castle'"),
        (_crop, "crop 'center' crops"),
    ],
    ids=["bislerp", "other-cfg", "other-prompt", "centre-crop"],
)
def test_chains_the_node_cannot_render_as_one_are_refused(
    client: TestClient, sdxl_kit: SDXLKit, change: Any, said: str
) -> None:
    graph = hires_graph(BY)
    change(graph)
    response = import_comfy(client, graph, {BASE: sdxl_kit.checkpoint_name})
    assert response.status_code == 422, response.text
    assert said in response.json()["error"]["message"]
