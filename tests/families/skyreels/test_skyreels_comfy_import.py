"""ComfyUI's SkyReels-V2 workflows through `POST /v1/import/comfy` (`families/skyreels/comfy.py`).

ComfyUI runs a SkyReels-V2 checkpoint through its native Wan 2.1 text-to-video chain: with a
SkyReels-V2 model file the chain imports onto `skywork/skyreels-v2`, told by the file (the Wan
kit's VAE and UMT5 files are the SkyReels kit's own parts: the same seeds and configs), with the
workflow's params, and renders the frames the graph written by hand renders; the chain's text
encoder loads as "wan" too, and the file outweighs it. The same chain with a plain Wan file is
Wan's (`tests/families/wan/test_wan_import.py`). Kijai's WanVideoWrapper diffusion-forcing
workflow (`WanVideoDiffusionForcingSampler`) is refused naming the sampler and SkyReels-V2's node.
The KSampler's sampler_name and scheduler are the node's `sampler` and `schedule`, one to one; a
name the node does not run is refused naming it and the closest, and a guided one
(`_cfg_pp`) at cfg 1 is a 422 at submit naming it.
"""

from __future__ import annotations

import shutil
from collections.abc import Generator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from skyreels_server import frames

from inline_core.families.skyreels.comfy_reader import has_fps_embedding
from inline_core.families.skyreels.descriptor import NODE_TYPE
from inline_core.families.skyreels.kit import FOLDER, SINGLE_FILE, SkyReelsKit
from inline_core.families.wan.kit import build_kit as build_wan_kit
from tests.families.import_harness import import_comfy, takes_of, target_of
from tests.server.server_support import cpu_client, prompt_graph

VAE, TEXT_ENCODER = "wan_2.1_vae.safetensors", "umt5_xxl_fp16.safetensors"
PROMPT = "a lighthouse in a storm"


@pytest.fixture(scope="module")
def served(
    skyreels_kit: SkyReelsKit, tmp_path_factory: pytest.TempPathFactory
) -> Generator[tuple[TestClient, dict[str, str]]]:
    """A server over the SkyReels kit, with the Wan kit's single-file VAE and UMT5 beside it;
    the workflow's VAE and text encoder files mapped onto those."""
    tmp = tmp_path_factory.mktemp("skyreels_import")
    wan = build_wan_kit(tmp / "wan", layouts=("comfy",), variants=("t2v",))
    assert wan.vae_file is not None and wan.text_encoder_file is not None
    root = tmp / "models"
    shutil.copytree(skyreels_kit.root, root)
    for category in ("vae", "text_encoders"):
        shutil.copytree(wan.root / category, root / category, dirs_exist_ok=True)
    mapped = {VAE: wan.vae_file.name, TEXT_ENCODER: wan.text_encoder_file.name}
    with cpu_client(root, tmp / "data") as client:
        yield client, mapped


def native_workflow(model: str) -> dict[str, Any]:
    """Wan 2.1's text-to-video template chain in the API format, at a size a CPU test renders."""
    return {
        "70": {"class_type": "UNETLoader",  # after the CLIPLoader: the file still decides
               "inputs": {"unet_name": model, "weight_dtype": "default"}},
        "38": {"class_type": "CLIPLoader", "inputs": {"clip_name": TEXT_ENCODER, "type": "wan"}},
        "39": {"class_type": "VAELoader", "inputs": {"vae_name": VAE}},
        "48": {"class_type": "ModelSamplingSD3", "inputs": {"shift": 5.0, "model": ["70", 0]}},
        "6": {"class_type": "CLIPTextEncode", "inputs": {"text": PROMPT, "clip": ["38", 0]}},
        "7": {"class_type": "CLIPTextEncode", "inputs": {"text": "blurry", "clip": ["38", 0]}},
        "40": {"class_type": "EmptyHunyuanLatentVideo",
               "inputs": {"width": 48, "height": 32, "length": 9, "batch_size": 1}},
        "3": {"class_type": "KSampler",
              "inputs": {"seed": 7, "steps": 2, "cfg": 3.0, "sampler_name": "uni_pc",
                         "scheduler": "simple", "denoise": 1.0, "model": ["48", 0],
                         "positive": ["6", 0], "negative": ["7", 0], "latent_image": ["40", 0]}},
        "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["39", 0]}},
        "60": {"class_type": "SaveAnimatedWEBP",
               "inputs": {"images": ["8", 0], "fps": 24, "filename_prefix": "skyreels"}},
    }  # fmt: skip


@pytest.mark.parametrize("model", [FOLDER, SINGLE_FILE], ids=["folder", "single_file"])
def test_a_native_wan_chain_with_a_skyreels_file_imports_onto_the_skyreels_node(
    served: tuple[TestClient, dict[str, str]], model: str
) -> None:
    client, mapped = served
    response = import_comfy(client, native_workflow(model), mapped)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["family"]["name"] == "skyreels"
    target, nodes = target_of(body)
    assert target["type"] == NODE_TYPE
    expected = {
        "model": model, "width": 48, "height": 32, "frames": 9, "fps": 24, "steps": 2,
        "guidance": 3.0, "shift": 5.0, "seed": 7, "format": "png", "sampler": "uni_pc",
        "schedule": "simple", "negative_prompt": "blurry", "vae": mapped[VAE],
        "text_encoder": mapped[TEXT_ENCODER],
    }  # fmt: skip
    assert {k: target["params"].get(k) for k in expected} == expected
    # One window, every frame at the sampler's step: the node's chunking params left alone.
    assert not {"base_frames", "overlap"} & {k for k, v in target["params"].items() if v}
    assert nodes[target["inputs"]["prompt"]["from"]]["params"]["text"] == PROMPT
    # ComfyUI's Wan model leaves the file's fps embedding unused; the node conditions on it.
    [change] = body["changesPicture"]
    assert change["nodeId"] == "70", change
    assert "fps embedding" in change["reason"], change

    by_hand = prompt_graph(NODE_TYPE, "s", expected, PROMPT)
    imported, written = takes_of(client, [(body["graph"], body["target"]), (by_hand, "s")])
    ours, theirs = (frames(client.get(t["uri"]).content) for t in (imported, written))
    assert ours.shape[0] == 9
    assert np.array_equal(ours, theirs)


def test_the_samplers_names_reach_the_node_one_to_one(
    served: tuple[TestClient, dict[str, str]],
) -> None:
    client, mapped = served
    workflow = native_workflow(FOLDER)
    workflow["3"]["inputs"].update(sampler_name="euler_ancestral", scheduler="karras")
    response = import_comfy(client, workflow, mapped)
    assert response.status_code == 200, response.text
    target, _nodes = target_of(response.json())
    assert target["params"]["sampler"] == "euler_ancestral"
    assert target["params"]["schedule"] == "karras"
    assert [c["nodeId"] for c in response.json()["changesPicture"]] == ["70"]  # the fps only

    workflow["3"]["inputs"].update(sampler_name="dpm_fast", scheduler="simple")
    refused = import_comfy(client, workflow, mapped)
    assert refused.status_code == 422, refused.text
    message = refused.json()["error"]["message"]
    assert "'dpm_fast' is not offered" in message and "Nothing is swapped" in message, message


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"sampler": "euler_cfg_pp", "guidance": 1.0}, "euler_cfg_pp"),
        ({"sampler": "dpm_fast"}, "dpm_fast"),
        ({"schedule": "align_your_steps"}, "align_your_steps"),
    ],
)
def test_a_sampler_the_node_cannot_run_is_a_422_at_submit_naming_it(
    served: tuple[TestClient, dict[str, str]], params: dict[str, Any], named: str
) -> None:
    client, mapped = served
    render = {
        "model": FOLDER, "width": 48, "height": 32, "frames": 9, "steps": 2, "format": "png",
        "vae": mapped[VAE], "text_encoder": mapped[TEXT_ENCODER], **params,
    }  # fmt: skip
    response = client.post(
        "/v1/runs", json={"graph": prompt_graph(NODE_TYPE, "s", render, PROMPT), "target": "s"}
    )
    assert response.status_code == 422, response.text
    assert named in response.json()["error"]["message"]


def test_the_single_file_renders_the_diffusers_folders_frames(
    served: tuple[TestClient, dict[str, str]],
) -> None:
    """The kit's transformer in the original keys (its fps projection renamed both ways) and
    in diffusers' folder, on the same VAE and text encoder files: the same frames."""
    client, mapped = served
    params: dict[str, Any] = {
        "width": 48, "height": 32, "frames": 9, "steps": 2, "seed": 5, "guidance": 3.0,
        "format": "png", "vae": mapped[VAE], "text_encoder": mapped[TEXT_ENCODER],
    }  # fmt: skip
    graphs = [(prompt_graph(NODE_TYPE, "s", {**params, "model": m}, PROMPT), "s") for m in
              (SINGLE_FILE, FOLDER)]  # fmt: skip
    single, folder = (frames(client.get(t["uri"]).content) for t in takes_of(client, graphs))
    assert single.shape == folder.shape == (9, 32, 48, 3)
    assert np.array_equal(single, folder)


def kijai_workflow() -> dict[str, Any]:
    """Kijai's WanVideoWrapper diffusion-forcing chain (its example's classes), API format."""
    model = "Wan2_1-SkyReels-V2-DF-1_3B-540P_fp32.safetensors"
    return {
        "1": {"class_type": "WanVideoModelLoader",
              "inputs": {"model": model, "base_precision": "bf16", "quantization": "disabled",
                         "load_device": "offload_device"}},
        "2": {"class_type": "LoadWanVideoT5TextEncoder",
              "inputs": {"model_name": "umt5-xxl-enc-bf16.safetensors", "precision": "bf16"}},
        "3": {"class_type": "WanVideoTextEncode",
              "inputs": {"positive_prompt": PROMPT, "negative_prompt": "blurry",
                         "t5": ["2", 0]}},
        "4": {"class_type": "WanVideoEmptyEmbeds",
              "inputs": {"width": 960, "height": 544, "num_frames": 97}},
        "5": {"class_type": "WanVideoDiffusionForcingSampler",
              "inputs": {"model": ["1", 0], "text_embeds": ["3", 0], "image_embeds": ["4", 0],
                         "addnoise_condition": 10, "fps": 24.0, "steps": 30, "cfg": 6.0,
                         "shift": 8.0, "seed": 1, "force_offload": True,
                         "scheduler": "unipc"}},
        "6": {"class_type": "WanVideoVAELoader",
              "inputs": {"model_name": "Wan2_1_VAE_bf16.safetensors"}},
        "7": {"class_type": "WanVideoDecode", "inputs": {"vae": ["6", 0], "samples": ["5", 0]}},
    }  # fmt: skip


def test_kijais_diffusion_forcing_workflow_is_refused_naming_the_sampler_and_the_node(
    served: tuple[TestClient, dict[str, str]],
) -> None:
    client, _mapped = served
    response = import_comfy(client, kijai_workflow())
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "unsupported_model_family"
    message = error["message"]
    assert "built for SkyReels-V2 (WanVideoDiffusionForcingSampler 5" in message, message
    assert "build the graph with SkyReels-V2's node" in message, message


def test_the_fps_note_follows_the_files_fps_embedding(
    skyreels_kit: SkyReelsKit, tmp_path: Path
) -> None:
    """The note is the file's: both kit layouts hold the embedding; a Wan transformer holds
    none (it renders as ComfyUI's); a file that cannot be read is not known to lack one."""
    assert has_fps_embedding(skyreels_kit.diffusers_dir) is True
    assert has_fps_embedding(skyreels_kit.diffusion_file) is True
    wan = build_wan_kit(tmp_path / "wan", layouts=("comfy",), variants=("t2v",))
    [wan_file] = (wan.root / "diffusion_models").glob("*.safetensors")
    assert has_fps_embedding(wan_file) is False
    broken = tmp_path / "broken.safetensors"
    broken.write_bytes(b"not a header")
    assert has_fps_embedding(broken) is None
