"""ComfyUI's FLUX.2 klein workflows import onto `bfl/flux-2` (through `POST /v1/import/comfy`,
the family's recipe in its package): the official klein templates' SamplerCustomAdvanced chains
become one node with the workflow's params and reference images; the official text to image and
edit templates, cut down for a CPU, render the pixels the graph written by hand renders; what
does not map (the 9B KV template's cache node, a negative prompt, DisableNoise, a fourth
reference) is refused naming it, and what renders otherwise is listed as changing the picture."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from inline_core.families.flux2.descriptor import NODE_TYPE
from inline_core.importer.comfy import read_workflow
from tests.families.import_harness import finished, target_of, template
from tests.server.server_support import prompt_graph
from tests.server.test_flux2_server import upload
from tests.server.test_qwen_image_import import rendered

Json = dict[str, Any]
DISTILLED = "flux2_klein_tiny.safetensors"
BASE = "flux2_klein_base_tiny.safetensors"
VAE = "flux2_tiny_vae.safetensors"
ENCODER = "flux2_tiny_qwen3"
# The templates' files onto the kit's (distilled onto distilled, base onto base).
MODELS = {
    "flux-2-klein-4b.safetensors": DISTILLED,
    "flux-2-klein-4b-fp8.safetensors": DISTILLED,
    "flux-2-klein-9b-fp8.safetensors": DISTILLED,
    "flux-2-klein-base-4b.safetensors": BASE,
    "flux-2-klein-base-4b-fp8.safetensors": BASE,
    "flux-2-klein-base-9b-fp8.safetensors": BASE,
    "qwen_3_4b.safetensors": ENCODER,
    "qwen_3_8b_fp8mixed.safetensors": ENCODER,
    "flux2-vae.safetensors": VAE,
    "full_encoder_small_decoder.safetensors": VAE,
}
SMALL: Json = {"width": 64, "height": 64, "steps": 2}
COMMON: Json = {"vae": VAE, "text_encoder": ENCODER, "sampler": "euler"}
# An edit's reference is scaled by the model, and its size measured from the image in ComfyUI.
EDIT_CHANGES = {"ImageScaleToTotalPixels", "EmptyFlux2LatentImage"}


def import_comfy(client: TestClient, workflow: Any, **extra: Any) -> Any:
    return client.post("/v1/import/comfy", json={"workflow": workflow, "models": MODELS, **extra})


def by_hand(prompt: str, images: dict[str, str], **params: Any) -> Json:
    """The same render as a graph written by hand."""
    return prompt_graph(NODE_TYPE, "f", {**COMMON, **params}, prompt, images)


@pytest.mark.parametrize(
    ("name", "expected", "image"),
    [
        ("image_flux2_klein_text_to_image.json",
         {"model": BASE, "steps": 20, "guidance": 5.0, "width": 1024, "height": 1024}, None),
        ("image_flux2_text_to_image_9b.json",
         {"model": BASE, "steps": 20, "guidance": 5.0, "width": 1024, "height": 1024}, None),
        ("image_flux2_klein_image_edit_4b_distilled.json",
         {"model": DISTILLED, "steps": 4, "guidance": 1.0}, "handbag_white.png"),
        ("image_flux2_klein_image_edit_9b_distilled.json",
         {"model": DISTILLED, "steps": 4, "guidance": 1.0}, "bold_outfit_woman.jpeg"),
        ("image_flux2_klein_image_edit_4b_base.json",
         {"model": BASE, "steps": 20, "guidance": 5.0}, "robed_women.png"),
        ("image_flux2_klein_image_edit_9b_base.json",
         {"model": BASE, "steps": 20, "guidance": 5.0}, "car_interior_white.jpeg"),
    ],
)  # fmt: skip
def test_official_klein_templates_import_as_one_flux2_node(
    client: TestClient, name: str, expected: Json, image: str | None
) -> None:
    workflow = template(name)
    assets = {} if image is None else {image: upload(client, 96, 64)}
    response = import_comfy(client, workflow, assets=assets)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["family"] == {"name": "flux-2", "title": "FLUX.2"}
    target, nodes = target_of(body)
    assert target["type"] == NODE_TYPE
    assert {k: target["params"][k] for k in {**expected, **COMMON}} == {**expected, **COMMON}
    assert "negative_prompt" not in target["params"]  # guided against the empty prompt
    prompt = nodes[target["inputs"]["prompt"]["from"]]
    assert prompt["type"] == "input/text" and prompt["params"]["text"].strip()
    wired = {p for p in ("image", "image2", "image3") if p in target["inputs"]}
    assert wired == ({"image"} if image else set())
    if image is not None:
        reference = nodes[target["inputs"]["image"]["from"]]
        assert reference["params"]["asset"]["id"] == assets[image]
    changes = {c["classType"] for c in body["changesPicture"]}
    assert changes == (EDIT_CHANGES if image else set())
    submitted = client.post("/v1/runs", json={"graph": body["graph"], "target": body["target"]})
    assert submitted.status_code == 201, submitted.text  # it validates as it stands
    client.delete(f"/v1/runs/{submitted.json()['runId']}")
    finished(client, str(submitted.json()["runId"]), seconds=300)


def cut_down(body: Json) -> Json:
    """The imported graph at a size and step count a CPU renders."""
    graph = body["graph"]
    for node in graph["nodes"]:
        if node["id"] == body["target"]:
            node["params"].update(SMALL)
    return graph


def test_the_official_text_to_image_template_renders_the_hand_written_graphs_pixels(
    client: TestClient,
) -> None:
    # The base 4B subgraph: guided at cfg 5 against the empty prompt, on the base model.
    body = import_comfy(client, template("image_flux2_klein_text_to_image.json")).json()
    target, nodes = target_of(body)
    prompt = nodes[target["inputs"]["prompt"]["from"]]["params"]["text"]
    imported = rendered(client, cut_down(body), body["target"])
    params = {k: target["params"][k] for k in ("seed", "guidance", "model")}
    written = rendered(client, by_hand(prompt, {}, **params, **SMALL), "f")
    assert params["guidance"] == 5.0 and params["model"] == BASE
    assert np.array_equal(imported, written)
    assert imported.std() > 1.0


def test_the_official_edit_template_renders_the_hand_written_graphs_pixels(
    client: TestClient,
) -> None:
    asset = upload(client, 96, 64)
    workflow = template("image_flux2_klein_image_edit_4b_distilled.json")
    body = import_comfy(client, workflow, assets={"handbag_white.png": asset}).json()
    target, nodes = target_of(body)
    prompt = nodes[target["inputs"]["prompt"]["from"]]["params"]["text"]
    assert prompt == "Change the bag color to blue."
    imported = rendered(client, cut_down(body), body["target"])
    params = {k: target["params"][k] for k in ("seed", "guidance", "model")}
    written = rendered(client, by_hand(prompt, {"image": asset}, **params, **SMALL), "f")
    assert np.array_equal(imported, written)
    without = rendered(client, by_hand(prompt, {}, **params, **SMALL), "f")
    assert not np.array_equal(imported, without)  # the reference is read


def api_workflow(references: list[str], *, negative: str = "", cfg: float = 1.0) -> Json:
    """A klein edit chain in ComfyUI's API format: each reference a LoadImage -> VAEEncode ->
    ReferenceLatent on both prompts, applied in the list's order."""
    nodes: Json = {
        "1": {"class_type": "UNETLoader",
              "inputs": {"unet_name": "flux-2-klein-4b.safetensors", "weight_dtype": "default"}},
        "2": {"class_type": "CLIPLoader",
              "inputs": {"clip_name": "qwen_3_4b.safetensors", "type": "flux2"}},
        "3": {"class_type": "VAELoader", "inputs": {"vae_name": "flux2-vae.safetensors"}},
        "4": {"class_type": "CLIPTextEncode", "inputs": {"text": "make it red", "clip": ["2", 0]}},
        "5": {"class_type": "CLIPTextEncode", "inputs": {"text": negative, "clip": ["2", 0]}},
        "7": {"class_type": "RandomNoise", "inputs": {"noise_seed": 11}},
        "8": {"class_type": "KSamplerSelect", "inputs": {"sampler_name": "euler"}},
        "9": {"class_type": "Flux2Scheduler", "inputs": {"steps": 2, "width": 64, "height": 64}},
        "10": {"class_type": "EmptyFlux2LatentImage",
               "inputs": {"width": 64, "height": 64, "batch_size": 1}},
        "11": {"class_type": "SamplerCustomAdvanced",
               "inputs": {"noise": ["7", 0], "guider": ["6", 0], "sampler": ["8", 0],
                          "sigmas": ["9", 0], "latent_image": ["10", 0]}},
        "12": {"class_type": "VAEDecode", "inputs": {"samples": ["11", 0], "vae": ["3", 0]}},
        "13": {"class_type": "SaveImage", "inputs": {"images": ["12", 0], "filename_prefix": "f"}},
    }  # fmt: skip
    positive, negative_in = ["4", 0], ["5", 0]
    for i, name in enumerate(references):
        load, encode, pos, neg = (f"{20 + 4 * i + k}" for k in range(4))
        nodes[load] = {"class_type": "LoadImage", "inputs": {"image": name}}
        nodes[encode] = {
            "class_type": "VAEEncode",
            "inputs": {"pixels": [load, 0], "vae": ["3", 0]},
        }
        nodes[pos] = {"class_type": "ReferenceLatent",
                      "inputs": {"conditioning": positive, "latent": [encode, 0]}}  # fmt: skip
        nodes[neg] = {"class_type": "ReferenceLatent",
                      "inputs": {"conditioning": negative_in, "latent": [encode, 0]}}  # fmt: skip
        positive, negative_in = [pos, 0], [neg, 0]
    nodes["6"] = {
        "class_type": "CFGGuider",
        "inputs": {"model": ["1", 0], "positive": positive, "negative": negative_in, "cfg": cfg},
    }
    return nodes


def test_references_map_in_the_order_applied_and_render_as_written(client: TestClient) -> None:
    first, second = upload(client, 64, 96), upload(client, 80, 64)
    assets = {"a.png": first, "b.png": second}
    response = import_comfy(client, api_workflow(["a.png", "b.png"]), assets=assets)
    assert response.status_code == 200, response.text
    body = response.json()
    target, nodes = target_of(body)
    ids = {
        p: nodes[target["inputs"][p]["from"]]["params"]["asset"]["id"] for p in ("image", "image2")
    }
    assert ids == {"image": first, "image2": second}
    assert "image3" not in target["inputs"] and body["changesPicture"] == []
    assert {k: target["params"][k] for k in ("seed", "steps", "width", "height")} == {
        "seed": 11, **SMALL,
    }  # fmt: skip
    imported = rendered(client, body["graph"], body["target"])
    written = rendered(
        client, by_hand("make it red", ids, seed=11, guidance=1.0, model=DISTILLED, **SMALL), "f"
    )
    assert np.array_equal(imported, written)


def refusal(client: TestClient, workflow: Any, **extra: Any) -> Json:
    response = import_comfy(client, workflow, **extra)
    assert response.status_code == 422, response.text
    return dict(response.json()["error"])


def test_what_klein_cannot_render_is_refused_naming_it(client: TestClient) -> None:
    # ERNIE-Image's text encoder loads as "flux2" too: its model file says which it is.
    ernie = refusal(client, template("image_ernie_image.json"))
    assert ernie["code"] == "unsupported_model_family"
    assert ernie["message"].startswith("this workflow is built for ERNIE-Image (")
    kv = refusal(client, template("image_flux2_klein_9b_kv_image_edit.json"))
    assert kv["code"] == "unsupported_node" and "FluxKVCache" in kv["message"]
    negative = refusal(client, api_workflow([], negative="blurry", cfg=4.0))
    assert negative["code"] == "unsupported_node"
    assert "negative prompt 'blurry' is not offered" in negative["message"]
    no_noise = api_workflow([])
    no_noise["7"] = {"class_type": "DisableNoise", "inputs": {}}
    error = refusal(client, no_noise)
    assert error["code"] == "unsupported_node" and "DisableNoise 7" in error["message"]
    four = refusal(client, api_workflow([f"{i}.png" for i in range(4)]))
    assert "4 reference images" in four["message"] and "at most 3" in four["message"]


def test_a_schedule_sized_otherwise_and_a_zeroed_guided_negative_are_said(
    client: TestClient,
) -> None:
    workflow = api_workflow([], cfg=4.0)
    workflow["9"]["inputs"]["width"] = 1024
    workflow["14"] = {"class_type": "ConditioningZeroOut", "inputs": {"conditioning": ["4", 0]}}
    workflow["6"]["inputs"]["negative"] = ["14", 0]
    response = import_comfy(client, workflow)
    assert response.status_code == 200, response.text
    changes = {c["classType"]: c["reason"] for c in response.json()["changesPicture"]}
    assert set(changes) == {"Flux2Scheduler", "ConditioningZeroOut"}
    assert "width differ" in changes["Flux2Scheduler"]
    assert "empty prompt" in changes["ConditioningZeroOut"]


def test_templates_resolve_promoted_widgets_by_name() -> None:
    """The edit template's subgraph instance lists only its linked inputs: its CLIPLoader's
    file is the promoted value, not the image wired beside it."""
    workflow = read_workflow(template("image_flux2_klein_image_edit_4b_distilled.json"))
    loaders = [n for n in workflow.nodes.values() if n.class_type == "CLIPLoader"]
    assert [n.inputs["clip_name"] for n in loaders] == ["qwen_3_4b.safetensors"]
