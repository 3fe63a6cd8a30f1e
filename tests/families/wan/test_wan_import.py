"""ComfyUI's Wan workflows import onto `alibaba/wan` (through `POST /v1/import/comfy`): the
official Wan 2.1 text-to-video and Wan 2.2 5B templates' chains become one node with the
workflow's params, an imported workflow renders the same frames as the graph written by hand;
Wan 2.1's CLIP-vision image-to-video template (`WanImageToVideo`, `CLIPVisionEncode`,
`CLIPVisionLoader`) imports onto the node with its start image, and renders as the graph
written by hand does (A14B's two-stage sampling: `test_wan_a14b_import.py`)."""

from __future__ import annotations

import io
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from test_wan_server import finished_state, wan_graph
from wan_harness import first_frame_image

from inline_core.config import Config
from inline_core.families.wan.kit import WanKit
from inline_core.families.zimage.kit import build_kit as build_zimage_kit
from inline_core.runtime.video import decode_apng
from inline_core.server.app import create_app
from tests.families.import_harness import import_comfy as import_workflow
from tests.families.import_harness import takes_of, template, upload_png

TI2V_FILE = "wan2.2_ti2v_tiny_fp32.safetensors"
# The workflows' VAEs and text encoders onto the kit's (the node renders with the files named).
PARTS = {
    "umt5_xxl_fp8_e4m3fn_scaled.safetensors": "umt5_tiny_fp32.safetensors",
    "umt5_xxl_fp16.safetensors": "umt5_tiny_fp32.safetensors",
    "wan_2.1_vae.safetensors": "wan_2.1_vae_tiny.safetensors",
    "wan2.2_vae.safetensors": "wan2.2_vae_tiny.safetensors",
}
MODELS = {
    "wan2.1_t2v_1.3B_fp16.safetensors": "wan2.1_t2v_tiny_fp32.safetensors",
    "wan2.2_ti2v_5B_fp16.safetensors": TI2V_FILE,
    "wan2.1_i2v_480p_14B_fp16.safetensors": "wan2.1_i2v_tiny_fp32.safetensors",
    **PARTS,
}


def import_comfy(client: TestClient, workflow: Any, **extra: Any) -> Any:
    return import_workflow(client, workflow, MODELS, **extra)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "text_to_video_wan.json",
            {"model": "wan2.1_t2v_tiny_fp32.safetensors", "width": 832, "height": 480,
             "frames": 33, "fps": 16, "steps": 30, "guidance": 6.0, "shift": 8.0,
             "format": "mp4", "vae": "wan_2.1_vae_tiny.safetensors",
             "text_encoder": "umt5_tiny_fp32.safetensors"},
        ),
        (
            "video_wan2_2_5B_ti2v.json",
            {"model": TI2V_FILE, "width": 1280, "height": 704, "frames": 121, "fps": 24,
             "steps": 20, "guidance": 5.0, "shift": 8.0, "format": "mp4",
             "vae": "wan2.2_vae_tiny.safetensors", "text_encoder": "umt5_tiny_fp32.safetensors"},
        ),
    ],
)  # fmt: skip
def test_official_templates_import_as_one_wan_node(
    client: TestClient, name: str, expected: dict[str, Any]
) -> None:
    response = import_comfy(client, template(name))
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["family"] == {"name": "wan", "title": "Wan"}
    nodes = {n["id"]: n for n in body["graph"]["nodes"]}
    target = nodes[body["target"]]
    assert target["type"] == "alibaba/wan"
    assert {k: target["params"][k] for k in expected} == expected
    assert target["params"]["negative_prompt"]  # the template's negative prompt came along
    prompt = nodes[target["inputs"]["prompt"]["from"]]
    assert prompt["type"] == "input/text" and prompt["params"]["text"]
    assert "image" not in target["inputs"]  # neither template wires a start image
    # The workflow's VAE and text encoder are the node's, not left for it to find.
    assert not {"VAELoader", "CLIPLoader"} & {s["classType"] for s in body["skipped"]}
    assert body["changesPicture"] == []
    submitted = client.post("/v1/runs", json={"graph": body["graph"], "target": body["target"]})
    assert submitted.status_code == 201, submitted.text  # it validates as it stands
    client.delete(f"/v1/runs/{submitted.json()['runId']}")
    finished_state(client, str(submitted.json()["runId"]))


def rendered_alike(
    client: TestClient, body: dict[str, Any], by_hand: dict[str, Any]
) -> list[dict[str, Any]]:
    """The imported graph and the one written by hand, rendered: the same frames; their takes."""
    takes: list[dict[str, Any]] = takes_of(
        client, [(body["graph"], body["target"]), (by_hand, "w")]
    )
    frames = [decode_apng(client.get(take["uri"]).content) for take in takes]
    assert np.array_equal(frames[0], frames[1])
    return takes


def small_workflow(image: str | None) -> dict[str, Any]:
    """The 5B template's chain in the API format, at a size a CPU test renders."""
    latent: dict[str, Any] = {"width": 64, "height": 32, "length": 9, "batch_size": 1,
                              "vae": ["39", 0]}  # fmt: skip
    nodes: dict[str, Any] = {
        "37": {"class_type": "UNETLoader",
               "inputs": {"unet_name": "wan2.2_ti2v_5B_fp16.safetensors"}},
        "38": {"class_type": "CLIPLoader",
               "inputs": {"clip_name": "umt5_xxl_fp16.safetensors", "type": "wan"}},
        "39": {"class_type": "VAELoader", "inputs": {"vae_name": "wan2.2_vae.safetensors"}},
        "48": {"class_type": "ModelSamplingSD3", "inputs": {"shift": 6.0, "model": ["37", 0]}},
        "6": {"class_type": "CLIPTextEncode",
              "inputs": {"text": "a paper boat on a rainy street", "clip": ["38", 0]}},
        "7": {"class_type": "CLIPTextEncode", "inputs": {"text": "blurry", "clip": ["38", 0]}},
        "55": {"class_type": "Wan22ImageToVideoLatent", "inputs": latent},
        "3": {"class_type": "KSampler",
              "inputs": {"seed": 11, "steps": 3, "cfg": 3.0, "sampler_name": "uni_pc",
                         "scheduler": "simple", "denoise": 1.0, "model": ["48", 0],
                         "positive": ["6", 0], "negative": ["7", 0], "latent_image": ["55", 0]}},
        "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["39", 0]}},
        "60": {"class_type": "SaveAnimatedWEBP",
               "inputs": {"images": ["8", 0], "fps": 24, "filename_prefix": "wan"}},
    }  # fmt: skip
    if image is not None:
        nodes["52"] = {"class_type": "LoadImage", "inputs": {"image": image}}
        latent["start_image"] = ["52", 0]
    return nodes


def small_graph(image: str | None, **params: Any) -> dict[str, Any]:
    """`small_workflow`'s render written by hand (`params`: the node's, in place of its)."""
    return wan_graph(
        "a paper boat on a rainy street",
        image=image,
        **{
            "model": TI2V_FILE,
            "width": 64,
            "height": 32,
            "frames": 9,
            "fps": 24,
            "steps": 3,
            "guidance": 3.0,
            "shift": 6.0,
            "negative_prompt": "blurry",
            "format": "png",
            "sampler": "uni_pc",  # the KSampler's names, one to one
            "schedule": "simple",
            **params,
        },
    )


@pytest.mark.parametrize("with_image", [False, True], ids=["t2v", "i2v"])
def test_an_imported_workflow_renders_the_hand_written_graphs_frames(
    client: TestClient, with_image: bool
) -> None:
    asset = None
    extra: dict[str, Any] = {}
    if with_image:
        buf = io.BytesIO()
        first_frame_image(50, 40).save(buf, format="PNG")
        uploaded = client.post(
            "/v1/assets", content=buf.getvalue(), headers={"content-type": "image/png"}
        )
        asset = str(uploaded.json()["id"])
        extra["assets"] = {"start.png": asset}
    response = import_comfy(client, small_workflow("start.png" if with_image else None), **extra)
    assert response.status_code == 200, response.text
    body = response.json()
    assert any("lossless animated PNG" in w for w in body["warnings"])  # WebP is not offered
    for take in rendered_alike(client, body, small_graph(asset)):
        assert take["params"]["image_to_video"] is with_image


def upload(client: TestClient, seed: int = 0) -> str:
    return upload_png(client, first_frame_image(50, 40, seed=seed))


def test_wan_21_clip_vision_template_imports_with_its_start_image(client: TestClient) -> None:
    asset = upload(client)
    workflow = template("image_to_video_wan.json")
    response = import_comfy(client, workflow, assets={"image_to_video_wan_start_image.png": asset})
    assert response.status_code == 200, response.text
    body = response.json()
    nodes = {n["id"]: n for n in body["graph"]["nodes"]}
    target = nodes[body["target"]]
    assert target["type"] == "alibaba/wan"
    expected = {"model": "wan2.1_i2v_tiny_fp32.safetensors", "width": 512, "height": 512,
                "frames": 33, "fps": 16, "steps": 20, "guidance": 6.0, "shift": 8.0}  # fmt: skip
    assert {k: target["params"][k] for k in expected} == expected
    image = nodes[target["inputs"]["image"]["from"]]
    assert image["type"] == "input/image" and image["params"]["asset"]["id"] == asset
    skipped = {s["classType"]: s["reason"] for s in body["skipped"]}
    assert "CLIP vision" in skipped["CLIPVisionLoader"]
    # The template's CLIPVisionEncode does not crop; the node's view is center-cropped.
    assert any("crop 'none'" in w for w in body["warnings"])
    submitted = client.post("/v1/runs", json={"graph": body["graph"], "target": body["target"]})
    assert submitted.status_code == 201, submitted.text  # it validates as it stands
    client.delete(f"/v1/runs/{submitted.json()['runId']}")
    finished_state(client, str(submitted.json()["runId"]))


def test_an_imported_clip_vision_workflow_renders_the_hand_written_graphs_frames(
    client: TestClient,
) -> None:
    asset = upload(client)
    nodes: dict[str, Any] = {
        "37": {"class_type": "UNETLoader",
               "inputs": {"unet_name": "wan2.1_i2v_480p_14B_fp16.safetensors"}},
        "38": {"class_type": "CLIPLoader",
               "inputs": {"clip_name": "umt5_xxl_fp16.safetensors", "type": "wan"}},
        "39": {"class_type": "VAELoader", "inputs": {"vae_name": "wan_2.1_vae.safetensors"}},
        "49": {"class_type": "CLIPVisionLoader",
               "inputs": {"clip_name": "clip_vision_h.safetensors"}},
        "52": {"class_type": "LoadImage", "inputs": {"image": "start.png"}},
        "51": {"class_type": "CLIPVisionEncode",
               "inputs": {"clip_vision": ["49", 0], "image": ["52", 0], "crop": "center"}},
        "6": {"class_type": "CLIPTextEncode",
              "inputs": {"text": "a paper boat on a rainy street", "clip": ["38", 0]}},
        "7": {"class_type": "CLIPTextEncode", "inputs": {"text": "blurry", "clip": ["38", 0]}},
        "50": {"class_type": "WanImageToVideo",
               "inputs": {"positive": ["6", 0], "negative": ["7", 0], "vae": ["39", 0],
                          "clip_vision_output": ["51", 0], "start_image": ["52", 0],
                          "width": 48, "height": 32, "length": 9, "batch_size": 1}},
        "3": {"class_type": "KSampler",
              "inputs": {"seed": 11, "steps": 3, "cfg": 3.0, "sampler_name": "uni_pc",
                         "scheduler": "simple", "denoise": 1.0, "model": ["37", 0],
                         "positive": ["50", 0], "negative": ["50", 1], "latent_image": ["50", 2]}},
        "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["39", 0]}},
        "60": {"class_type": "SaveAnimatedWEBP",
               "inputs": {"images": ["8", 0], "fps": 16, "filename_prefix": "wan"}},
    }  # fmt: skip
    response = import_comfy(client, nodes, assets={"start.png": asset})
    assert response.status_code == 200, response.text
    body = response.json()
    assert not any("crop" in w for w in body["warnings"])  # a center crop is what it does
    by_hand = wan_graph(
        "a paper boat on a rainy street",
        image=asset,
        model="wan2.1_i2v_tiny_fp32.safetensors",
        width=48,
        height=32,
        frames=9,
        fps=16,
        steps=3,
        guidance=3.0,
        negative_prompt="blurry",
        format="png",
        sampler="uni_pc",
        schedule="simple",
    )
    rendered_alike(client, body, by_hand)


def test_a_wan_workflow_without_a_saved_video_says_so(client: TestClient) -> None:
    workflow = small_workflow(None)
    del workflow["60"]
    response = import_comfy(client, workflow)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "unsupported_model_family"
    assert (
        "built for Wan" in error["message"] and "SaveVideo or SaveAnimatedWEBP" in error["message"]
    )


def test_files_not_here_stay_named_and_the_run_is_refused_naming_them(
    client: TestClient,
) -> None:
    """No file the workflow names is swapped for another: the graph names them, the Wan files
    listed first among the candidates, and a submit is 422 `model_missing` naming the file."""
    response = client.post(
        "/v1/import/comfy", json={"workflow": template("text_to_video_wan.json")}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    target = next(n for n in body["graph"]["nodes"] if n["id"] == body["target"])
    params = target["params"]
    assert params["model"] == "wan2.1_t2v_1.3B_fp16.safetensors"
    assert params["vae"] == "wan_2.1_vae.safetensors"
    assert params["text_encoder"] == "umt5_xxl_fp8_e4m3fn_scaled.safetensors"
    unmatched = {m["category"]: m for m in body["unmatchedModels"]}
    assert set(unmatched) == {"diffusion_models", "vae", "text_encoders"}
    models = unmatched["diffusion_models"]
    assert models["file"] == "wan2.1_t2v_1.3B_fp16.safetensors" and models["using"] is None
    # Every file of the folder, Wan's first (the kit holds Wan files only).
    assert models["candidates"] and all("wan" in c for c in models["candidates"])
    vaes = unmatched["vae"]["candidates"]
    assert vaes[0] == "wan_2.1_vae_tiny.safetensors" and "wan2.2_vae_tiny.safetensors" in vaes
    submitted = client.post("/v1/runs", json={"graph": body["graph"], "target": body["target"]})
    assert submitted.status_code == 422, submitted.text
    error = submitted.json()["error"]
    assert error["code"] == "model_missing" and error["nodeId"] == body["target"]
    assert "wan2.1_t2v_1.3B_fp16.safetensors" in error["message"]


def test_a_vae_the_workflow_names_is_the_one_the_node_renders_with(client: TestClient) -> None:
    """The workflow's VAE is honoured: a Wan 2.2 VAE named for a Wan 2.1 model is refused at
    submit naming it, where the node used to find the right one itself and drop the choice."""
    models = {**MODELS, "wan_2.1_vae.safetensors": "wan2.2_vae_tiny.safetensors"}
    response = client.post(
        "/v1/import/comfy",
        json={"workflow": template("text_to_video_wan.json"), "models": models},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    target = next(n for n in body["graph"]["nodes"] if n["id"] == body["target"])
    assert target["params"]["vae"] == "wan2.2_vae_tiny.safetensors"
    submitted = client.post("/v1/runs", json={"graph": body["graph"], "target": body["target"]})
    assert submitted.status_code == 422, submitted.text
    error = submitted.json()["error"]
    assert error["code"] == "model_missing" and "wan2.2_vae_tiny.safetensors" in error["message"]


def test_a_family_nodes_model_picker_offers_only_its_familys_files(
    wan_kit: WanKit, tmp_path: Path
) -> None:
    """Z-Image's and Wan's models in one folder: each node's `model` picker lists its own."""
    root = tmp_path / "models"
    shutil.copytree(wan_kit.root, root)
    zimage = build_zimage_kit(tmp_path / "zimage", layouts=("comfy",))
    assert zimage.diffusion_file is not None
    shutil.copy(zimage.diffusion_file, root / "diffusion_models" / "z_image_tiny.safetensors")
    assert zimage.vae_file is not None
    shutil.copy(zimage.vae_file, root / "vae" / "z_image_vae_tiny.safetensors")
    config = Config(models_dir=root, data_dir=tmp_path / "data", profile="cpu", dtype="float32")
    with TestClient(create_app(config)) as client:
        models = {m["type"]: m for m in client.get("/v1/models").json()["models"]}

        def options(node_type: str, param: str) -> list[str]:
            (spec,) = [p for p in models[node_type]["params"] if p["name"] == param]
            return list(spec["options"])

        assert options("alibaba/z-image-turbo", "model") == ["z_image_tiny.safetensors"]
        wan = options("alibaba/wan", "model")
        assert TI2V_FILE in wan and "z_image_tiny.safetensors" not in wan
        # The shared low-level loader still lists the whole folder.
        assert set(options("load/diffusion-model", "file")) >= {"z_image_tiny.safetensors", *wan}
        # A node's own endpoint says the same.
        one = client.get("/v1/models/alibaba/z-image-turbo").json()
        (spec,) = [p for p in one["params"] if p["name"] == "model"]
        assert spec["options"] == ["z_image_tiny.safetensors"]
        # A file not there: the error lists every VAE, the node's family's first (the Wan ones
        # sort before it by name).
        vaes = options("alibaba/z-image-turbo", "vae")
        assert vaes[0] == "z_image_vae_tiny.safetensors" and len(vaes) > 1
        graph = {
            "schemaVersion": 1,
            "nodes": [
                {"id": "p", "type": "input/text", "params": {"text": "a cat"}},
                {
                    "id": "img",
                    "type": "alibaba/z-image-turbo",
                    "params": {"vae": "gone.safetensors"},
                    "inputs": {"prompt": {"from": "p", "output": "text"}},
                },
            ],
        }
        refused = client.post("/v1/runs", json={"graph": graph, "target": "img"})
        assert refused.status_code == 422, refused.text
        error = refused.json()["error"]
        assert error["code"] == "model_missing" and error["nodeId"] == "img"
        listed = error["message"].split("choose one of ", 1)[1]
        assert listed == ", ".join(repr(v) for v in vaes)
