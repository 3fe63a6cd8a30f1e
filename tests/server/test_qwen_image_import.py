"""ComfyUI's Qwen-Image workflows import onto `alibaba/qwen-image` (through
`POST /v1/import/comfy`, the family's recipe in its package): the official Qwen-Image, 2512 and
Edit 2509/2511 templates' chains become one node with the workflow's params and images; a text
to image and an edit workflow in ComfyUI's own layout render the pixels the graph written by
hand renders; a CFG++ sampler imports as itself; what does not map (the first Edit's prompt
template, a sampler not offered) is refused naming why."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image

from inline_core.families.qwen_image.descriptor import NODE_TYPE
from inline_core.families.qwen_image.kit import KitPaths, build_kit
from tests.families.import_harness import finished, target_of, template, upload_png
from tests.families.qwen_image.qwen_harness import (
    EDIT_MODEL,
    TEXT_MODEL,
    small_references,
    source_image,
)
from tests.server.server_support import cpu_client

Json = dict[str, Any]
LIGHTNING = "Qwen-Image-Edit-2509-Lightning-4steps-V1.0-bf16.safetensors"
VAE = "qwen_image_vae_tiny.safetensors"
TEXT_ENCODER = "qwen_2.5_vl_tiny.safetensors"
# The workflows' files onto the kit's (the node renders with the files named).
MODELS = {
    "qwen_image_fp8_e4m3fn.safetensors": TEXT_MODEL,
    "qwen_image_2512_fp8_e4m3fn.safetensors": TEXT_MODEL,
    "qwen_image_edit_2509_fp8_e4m3fn.safetensors": EDIT_MODEL,
    "qwen_image_edit_2511_fp8mixed.safetensors": EDIT_MODEL,
    "qwen_image_vae.safetensors": VAE,
    "qwen_2.5_vl_7b_fp8_scaled.safetensors": TEXT_ENCODER,
    # Edit 2509's Lightning LoRA, switched on in its template: the kit's one in that naming.
    LIGHTNING: "qwen_image_tiny_lora_a_lightning.safetensors",
}


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> KitPaths:
    return build_kit(tmp_path_factory.mktemp("qwen_import") / "models", layouts=("comfy",))


@pytest.fixture
def client(kit: KitPaths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    small_references(monkeypatch)  # edits encode their references small, as the CPU tests do
    with cpu_client(kit.root, tmp_path / "data") as c:
        yield c


def import_comfy(client: TestClient, workflow: Any, **extra: Any) -> Any:
    return client.post("/v1/import/comfy", json={"workflow": workflow, "models": MODELS, **extra})


COMMON: Json = {"vae": VAE, "text_encoder": TEXT_ENCODER, "sampler": "euler", "schedule": "simple"}


@pytest.mark.parametrize(
    ("name", "expected", "images"),
    [
        ("image_qwen_image.json",
         {"model": TEXT_MODEL, "width": 1328, "height": 1328, "steps": 20, "guidance": 4.0}, {}),
        ("image_qwen_Image_2512.json",
         {"model": TEXT_MODEL, "width": 1328, "height": 1328, "steps": 50, "guidance": 4.0}, {}),
        ("image_qwen_image_edit_2509.json",
         {"model": EDIT_MODEL, "steps": 4, "guidance": 1.0, "shift": 3.0},
         {"image": "image_qwen_image_edit_2509_input_image.png"}),
        ("image_qwen_image_edit_2511.json",
         {"model": EDIT_MODEL, "steps": 40, "guidance": 4.0, "shift": 3.1},
         {"image": "leather_sofa.png", "image2": "texture_fur.png"}),
    ],
)  # fmt: skip
def test_official_templates_import_as_one_qwen_image_node(
    client: TestClient, name: str, expected: Json, images: dict[str, str]
) -> None:
    assets = {
        file: upload_png(client, source_image(48, 32, i)) for i, file in enumerate(images.values())
    }
    response = import_comfy(client, template(name), assets=assets)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["family"] == {"name": "qwen-image", "title": "Qwen-Image"}
    target, nodes = target_of(body)
    assert target["type"] == NODE_TYPE
    assert {k: target["params"][k] for k in {**expected, **COMMON}} == {**expected, **COMMON}
    prompt = nodes[target["inputs"]["prompt"]["from"]]
    assert prompt["type"] == "input/text" and prompt["params"]["text"]
    for port, file in images.items():  # TextEncodeQwenImageEditPlus's image1, image2
        wired = nodes[target["inputs"][port]["from"]]
        assert wired["params"]["asset"]["id"] == assets[file]
    assert set(images) == {p for p in ("image", "image2", "image3") if p in target["inputs"]}
    edges: Json | list[Json] = target["inputs"].get("loras", [])
    loras = [nodes[e["from"]]["params"] for e in ([edges] if isinstance(edges, dict) else edges)]
    lightning = name == "image_qwen_image_edit_2509.json"  # its template's switch is on
    assert [(p["name"], p["strength"]) for p in loras] == (
        [(MODELS[LIGHTNING], 1.0)] if lightning else []
    )
    changes = {c["classType"] for c in body["changesPicture"]}
    if images:  # the model scales its images itself; CFGNorm (strength 1) is its own rescale
        assert changes == {"FluxKontextImageScale"}
    else:  # no CFGNorm in the chain, and guided: the rescale is said
        assert changes == {"KSampler"}
    submitted = client.post("/v1/runs", json={"graph": body["graph"], "target": body["target"]})
    assert submitted.status_code == 201, submitted.text  # it validates as it stands
    client.delete(f"/v1/runs/{submitted.json()['runId']}")
    finished(client, str(submitted.json()["runId"]), seconds=300)


def api_workflow(edit: str | None, lora: str | None) -> Json:
    """A Qwen-Image chain in ComfyUI's API format, at a size a CPU test renders: text to image,
    or (`edit`: an image's name) Edit 2509's chain with its scaler, VAEEncode latent and
    CFGNorm."""
    unet = (
        "qwen_image_edit_2509_fp8_e4m3fn.safetensors"
        if edit
        else "qwen_image_fp8_e4m3fn.safetensors"
    )
    nodes: Json = {
        "37": {"class_type": "UNETLoader", "inputs": {"unet_name": unet}},
        "38": {"class_type": "CLIPLoader",
               "inputs": {"clip_name": "qwen_2.5_vl_7b_fp8_scaled.safetensors",
                          "type": "qwen_image"}},
        "39": {"class_type": "VAELoader", "inputs": {"vae_name": "qwen_image_vae.safetensors"}},
        "66": {"class_type": "ModelSamplingAuraFlow", "inputs": {"shift": 2.5, "model": ["37", 0]}},
        "75": {"class_type": "CFGNorm", "inputs": {"strength": 1.0, "model": ["66", 0]}},
        "3": {"class_type": "KSampler",
              "inputs": {"seed": 11, "steps": 3, "cfg": 2.5, "sampler_name": "euler",
                         "scheduler": "simple", "denoise": 1.0, "model": ["75", 0],
                         "positive": ["6", 0], "negative": ["7", 0], "latent_image": ["58", 0]}},
        "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["39", 0]}},
        "60": {"class_type": "SaveImage", "inputs": {"images": ["8", 0], "filename_prefix": "q"}},
    }  # fmt: skip
    if lora is not None:
        nodes["73"] = {
            "class_type": "LoraLoaderModelOnly",
            "inputs": {"lora_name": lora, "strength_model": 0.7, "model": ["37", 0]},
        }
        nodes["66"]["inputs"]["model"] = ["73", 0]
    if edit is None:
        for node_id, text in (("6", "a teapot on a windowsill"), ("7", "grey")):
            nodes[node_id] = {
                "class_type": "CLIPTextEncode",
                "inputs": {"text": text, "clip": ["38", 0]},
            }
        nodes["58"] = {"class_type": "EmptySD3LatentImage",
                       "inputs": {"width": 64, "height": 48, "batch_size": 1}}  # fmt: skip
        return nodes
    nodes["78"] = {"class_type": "LoadImage", "inputs": {"image": edit}}
    nodes["117"] = {"class_type": "FluxKontextImageScale", "inputs": {"image": ["78", 0]}}
    for node_id, text in (("6", "make it blue"), ("7", "")):
        nodes[node_id] = {
            "class_type": "TextEncodeQwenImageEditPlus",
            "inputs": {"prompt": text, "clip": ["38", 0], "vae": ["39", 0], "image1": ["117", 0]},
        }
    nodes["58"] = {"class_type": "VAEEncode", "inputs": {"pixels": ["117", 0], "vae": ["39", 0]}}
    return nodes


def by_hand(image: str | None, lora: str | None, **params: Any) -> Json:
    """The same render as a graph written by hand."""
    node: Json = {
        "id": "q",
        "type": NODE_TYPE,
        "params": {"seed": 11, "steps": 3, "guidance": 2.5, "shift": 2.5, "vae": VAE,
                   "text_encoder": TEXT_ENCODER, **params},
        "inputs": {"prompt": {"from": "p", "output": "text"}},
    }  # fmt: skip
    text = "make it blue" if image else "a teapot on a windowsill"
    nodes: list[Json] = [{"id": "p", "type": "input/text", "params": {"text": text}}]
    if image is not None:
        nodes.append({"id": "i", "type": "input/image",
                      "params": {"asset": {"ref": "asset", "id": image}}})  # fmt: skip
        node["inputs"]["image"] = {"from": "i", "output": "image"}
    if lora is not None:
        nodes.append({"id": "l", "type": "input/lora", "params": {"name": lora, "strength": 0.7}})
        node["inputs"]["loras"] = [{"from": "l", "output": "lora"}]
    return {"schemaVersion": 1, "nodes": [*nodes, node]}


def rendered(client: TestClient, graph: Json, target: str) -> Any:
    run = client.post("/v1/runs", json={"graph": graph, "target": target})
    assert run.status_code == 201, run.text
    state = finished(client, str(run.json()["runId"]), seconds=300)
    assert state["status"] == "done", state
    (take,) = state["takes"]
    with Image.open(io.BytesIO(client.get(take["uri"]).content)) as image:
        return np.asarray(image.convert("RGB"), dtype=np.int16)


def test_an_imported_text_to_image_workflow_renders_the_hand_written_graphs_pixels(
    client: TestClient, kit: KitPaths
) -> None:
    lora = kit.loras["a-comfy"].name  # a ComfyUI-named LoRA, as the Lightning ones load
    response = import_comfy(client, api_workflow(None, lora))
    assert response.status_code == 200, response.text
    body = response.json()
    target, _nodes = target_of(body)
    assert (target["params"]["width"], target["params"]["height"]) == (64, 48)
    assert body["changesPicture"] == []  # CFGNorm at strength 1: the rescale the node does
    # One after the other: a row batched with another differs by a few ulps from it alone.
    imported = rendered(client, body["graph"], body["target"])
    written = rendered(
        client,
        by_hand(None, lora, negative_prompt="grey", width=64, height=48, model=TEXT_MODEL),
        "q",
    )
    assert np.array_equal(imported, written)
    assert imported.std() > 1.0


def test_an_imported_edit_workflow_renders_the_hand_written_graphs_pixels(
    client: TestClient,
) -> None:
    asset = upload_png(client, source_image(64, 48, 3))
    response = import_comfy(client, api_workflow("cat.png", None), assets={"cat.png": asset})
    assert response.status_code == 200, response.text
    body = response.json()
    target, nodes = target_of(body)
    assert nodes[target["inputs"]["image"]["from"]]["params"]["asset"]["id"] == asset
    assert [c["classType"] for c in body["changesPicture"]] == ["FluxKontextImageScale"]
    imported = rendered(client, body["graph"], body["target"])
    written = rendered(client, by_hand(asset, None, model=EDIT_MODEL), "q")
    assert np.array_equal(imported, written)


def test_the_first_edits_template_and_a_sampler_not_offered_are_refused_naming_why(
    client: TestClient,
) -> None:
    first_edit = import_comfy(client, template("image_qwen_image_edit.json"))
    assert first_edit.status_code == 422, first_edit.text
    error = first_edit.json()["error"]
    assert error["code"] == "unsupported_node"
    assert "TextEncodeQwenImageEdit" in error["message"]
    assert "prompt template is not offered" in error["message"]
    workflow = api_workflow(None, None)
    workflow["3"]["inputs"]["sampler_name"] = "euler_cfg_pp_unknown"
    refused = import_comfy(client, workflow)
    assert refused.status_code == 422, refused.text
    assert (
        "the sampler 'euler_cfg_pp_unknown' is not offered here"
        in refused.json()["error"]["message"]
    )


@pytest.mark.parametrize("sampler", ["euler_cfg_pp", "dpmpp_2m_cfg_pp"])
def test_a_cfg_pp_sampler_imports_as_itself_onto_the_node(client: TestClient, sampler: str) -> None:
    workflow = api_workflow(None, None)  # guided: cfg 2.5 on the negative "grey"
    workflow["3"]["inputs"]["sampler_name"] = sampler
    response = import_comfy(client, workflow)
    assert response.status_code == 200, response.text
    body = response.json()
    target, _nodes = target_of(body)
    assert target["params"]["sampler"] == sampler  # one to one, never its plain sampler
    assert body["changesPicture"] == []
    submitted = client.post("/v1/runs", json={"graph": body["graph"], "target": body["target"]})
    assert submitted.status_code == 201, submitted.text  # it validates as it stands
    client.delete(f"/v1/runs/{submitted.json()['runId']}")
    finished(client, str(submitted.json()["runId"]), seconds=300)
