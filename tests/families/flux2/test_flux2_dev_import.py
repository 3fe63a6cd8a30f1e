"""ComfyUI's FLUX.2 dev templates import onto `bfl/flux-2` (the family's recipe): the
BasicGuider chain with the prompt through FluxGuidance becomes one node whose `guidance` is
FluxGuidance's (the model's embedded guidance), the edits' ReferenceLatent chains its reference
images in the order applied; cut down for a CPU, the imported text to image and two-reference
edit templates render the hand-written graph's pixels; classifier-free guidance beside
FluxGuidance is refused naming both. With their Turbo switch on, the templates import onto the
node with the Turbo LoRA (BFL's naming, as ComfyUI's converted files name it) and 8 steps, and
render the hand-written graph's pixels with that LoRA. Off the node's chain, FluxGuidance maps
onto `conditioning/guidance`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from flux2_graphs import Graph, edge
from test_flux2_import import SMALL, api_workflow, cut_down
from test_flux2_primitives_import import PROMPT
from test_flux2_scheduler_import import img2img, scheduler

from inline_core.config import Config
from inline_core.families.flux2.descriptor import NODE_TYPE
from inline_core.families.flux2.kit_dev import Flux2DevKit
from inline_core.server.app import create_app
from tests.families.import_harness import import_comfy, target_of, template
from tests.server.server_support import prompt_graph
from tests.server.test_flux2_server import upload
from tests.server.test_qwen_image_import import rendered

Json = dict[str, Any]
DEV = "flux2_dev_tiny.safetensors"
VAE = "flux2_tiny_vae.safetensors"
ENCODER = "mistral_3_small_flux2_tiny.safetensors"
TURBO = "flux2_dev_tiny_turbo_lora.safetensors"
# The templates' files onto the kit's.
MODELS = {
    "flux2_dev_fp8mixed.safetensors": DEV,
    "mistral_3_small_flux2_bf16.safetensors": ENCODER,
    "mistral_3_small_flux2_fp8.safetensors": ENCODER,
    "flux2-vae.safetensors": VAE,
    "full_encoder_small_decoder.safetensors": VAE,
    "Flux_2-Turbo-LoRA_comfyui.safetensors": TURBO,  # ByteZSzn's conversion of fal's Turbo
    "Flux2TurboComfyv2.safetensors": TURBO,  # Comfy-Org's
}
COMMON: Json = {"model": DEV, "vae": VAE, "text_encoder": ENCODER, "sampler": "euler"}
TEXT_TO_IMAGE = "image_flux2_text_to_image.json"
EDIT_TWO = "image_flux2_fp8.json"  # two references: a design (applied first) and a picture
EDIT_IMAGES = ("image_flux2_input_ref_image.png", "image_flux2_input_Illustration.png")


@pytest.fixture(scope="module")
def client(
    flux2_dev_kit: Flux2DevKit, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TestClient]:
    data = tmp_path_factory.mktemp("flux2_dev_import") / "data"
    config = Config(models_dir=flux2_dev_kit.root, data_dir=data, profile="cpu", dtype="float32")
    with TestClient(create_app(config)) as c:
        yield c


@pytest.mark.parametrize(
    ("name", "images"),
    [
        (TEXT_TO_IMAGE, ()),
        ("image_flux2.json", ("image_flux2_input_image.png",)),
        (EDIT_TWO, EDIT_IMAGES),
    ],
)
def test_official_dev_templates_import_as_one_flux2_node(
    client: TestClient, name: str, images: tuple[str, ...]
) -> None:
    assets = {image: upload(client, 96, 64 + 16 * i) for i, image in enumerate(images)}
    response = import_comfy(client, template(name), MODELS, assets=assets)
    assert response.status_code == 200, response.text
    body = response.json()
    target, nodes = target_of(body)
    assert target["type"] == NODE_TYPE
    expected = {**COMMON, "steps": 20, "guidance": 4.0}  # FluxGuidance 4, the Turbo LoRA off
    assert {k: target["params"][k] for k in expected} == expected
    assert "loras" not in target["inputs"]
    ports = ("image", "image2", "image3")[: len(images)]
    wired = {p: nodes[target["inputs"][p]["from"]]["params"]["asset"]["id"] for p in ports}
    assert wired == {p: assets[image] for p, image in zip(ports, images, strict=True)}
    assert "image3" not in target["inputs"]


def test_the_text_to_image_template_renders_the_hand_written_graphs_pixels(
    client: TestClient,
) -> None:
    body = import_comfy(client, template(TEXT_TO_IMAGE), MODELS).json()
    target, nodes = target_of(body)
    prompt = nodes[target["inputs"]["prompt"]["from"]]["params"]["text"]
    imported = rendered(client, cut_down(body), body["target"])
    params = {k: target["params"][k] for k in ("seed", "guidance")}
    written = rendered(
        client, prompt_graph(NODE_TYPE, "f", {**COMMON, **params, **SMALL}, prompt), "f"
    )
    assert np.array_equal(imported, written)
    assert imported.std() > 1.0


def test_the_two_reference_edit_template_renders_the_hand_written_graphs_pixels(
    client: TestClient,
) -> None:
    assets = {EDIT_IMAGES[0]: upload(client, 96, 64), EDIT_IMAGES[1]: upload(client, 64, 80)}
    body = import_comfy(client, template(EDIT_TWO), MODELS, assets=assets).json()
    target, nodes = target_of(body)
    prompt = nodes[target["inputs"]["prompt"]["from"]]["params"]["text"]
    imported = rendered(client, cut_down(body), body["target"])
    refs = {"image": assets[EDIT_IMAGES[0]], "image2": assets[EDIT_IMAGES[1]]}
    params = {**COMMON, "seed": target["params"]["seed"], "guidance": 4.0, **SMALL}
    written = rendered(client, prompt_graph(NODE_TYPE, "f", params, prompt, refs), "f")
    assert np.array_equal(imported, written)
    swapped = {"image": refs["image2"], "image2": refs["image"]}
    other = rendered(client, prompt_graph(NODE_TYPE, "f", params, prompt, swapped), "f")
    assert not np.array_equal(imported, other)  # the order applied is the order read


def chain(unet: str, cfg: float, flux_guidance: float | None) -> Json:
    """A one-prompt chain in ComfyUI's API format on `unet`, FluxGuidance on its prompt."""
    workflow = api_workflow([], cfg=cfg)
    workflow["1"]["inputs"]["unet_name"] = unet
    workflow["2"]["inputs"]["clip_name"] = "mistral_3_small_flux2_bf16.safetensors"
    if flux_guidance is not None:
        workflow["30"] = {
            "class_type": "FluxGuidance",
            "inputs": {"conditioning": ["4", 0], "guidance": flux_guidance},
        }
        workflow["6"]["inputs"]["positive"] = ["30", 0]
    return workflow


def test_dev_without_flux_guidance_embeds_comfyuis_default_and_runs_no_cfg(
    client: TestClient,
) -> None:
    response = import_comfy(client, chain("flux2_dev_fp8mixed.safetensors", 1.0, None), MODELS)
    assert response.status_code == 200, response.text
    target, _nodes = target_of(response.json())
    assert target["params"]["guidance"] == 3.5
    response = import_comfy(client, chain("flux2_dev_fp8mixed.safetensors", 3.0, None), MODELS)
    assert response.status_code == 422, response.text
    assert "cfg 3" in response.json()["error"]["message"]


def test_flux_guidance_on_klein_does_nothing_as_in_comfyui(client: TestClient) -> None:
    # klein by the workflow's name: the file is not here to say otherwise
    response = import_comfy(client, chain("flux-2-klein-4b.safetensors", 1.0, 6.0), MODELS)
    assert response.status_code == 200, response.text
    body = response.json()
    target, _nodes = target_of(body)
    assert target["params"]["guidance"] == 1.0  # the guider's cfg, not FluxGuidance's 6
    assert any("no guidance embedder" in w for w in body["warnings"]), body["warnings"]


def test_the_file_here_tells_dev_whatever_the_workflow_names_it(client: TestClient) -> None:
    # A dev file under a name that says no variant, and one named as klein: the file's guidance
    # embedder decides, so both embed ComfyUI's default, as ComfyUI would with that file.
    for unet in ("my_model.safetensors", "flux-2-klein-4b.safetensors"):
        response = import_comfy(client, chain(unet, 1.0, None), {**MODELS, unet: DEV})
        assert response.status_code == 200, response.text
        target, _nodes = target_of(response.json())
        assert target["params"]["guidance"] == 3.5, unet


def test_a_file_not_here_named_as_no_variant_is_read_as_klein_and_said(
    client: TestClient,
) -> None:
    response = import_comfy(client, chain("my_model.safetensors", 1.0, None), MODELS)
    assert response.status_code == 200, response.text
    body = response.json()
    assert target_of(body)[0]["params"]["guidance"] == 1.0
    assert any("says no FLUX.2 variant" in w for w in body["warnings"]), body["warnings"]


def test_cfg_beside_flux_guidance_is_refused_naming_both(client: TestClient) -> None:
    workflow = chain("flux2_dev_fp8mixed.safetensors", 3.0, 4.0)
    response = import_comfy(client, workflow, MODELS)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "unsupported_node"
    assert "FluxGuidance 30" in error["message"] and "cfg 3" in error["message"]


def turbo_on(name: str) -> Json:
    """The template with its Turbo switch (the subgraph's PrimitiveBoolean) on."""
    workflow = template(name)
    for subgraph in workflow["definitions"]["subgraphs"]:
        for node in subgraph["nodes"]:
            if node["type"] == "PrimitiveBoolean":
                node["widgets_values"] = [True]
    return workflow


@pytest.mark.parametrize("name", [TEXT_TO_IMAGE, "image_flux2.json", EDIT_TWO])
def test_the_templates_turbo_path_imports_the_turbo_lora_at_8_steps(
    client: TestClient, name: str
) -> None:
    assets = {
        image: upload(client, 96, 64) for image in (*EDIT_IMAGES, "image_flux2_input_image.png")
    }
    response = import_comfy(client, turbo_on(name), MODELS, assets=assets)
    assert response.status_code == 200, response.text
    target, nodes = target_of(response.json())
    assert target["params"]["steps"] == 8 and target["params"]["guidance"] == 4.0
    lora = nodes[target["inputs"]["loras"]["from"]]
    assert lora["params"] == {"name": TURBO, "strength": 1.0}


def test_the_turbo_path_renders_the_hand_written_graphs_pixels_with_the_lora(
    client: TestClient,
) -> None:
    body = import_comfy(client, turbo_on(TEXT_TO_IMAGE), MODELS).json()
    target, nodes = target_of(body)
    prompt = nodes[target["inputs"]["prompt"]["from"]]["params"]["text"]
    size = {"width": 64, "height": 64}
    for node in body["graph"]["nodes"]:
        if node["id"] == body["target"]:
            node["params"].update(size)
    imported = rendered(client, body["graph"], body["target"])
    params = {**COMMON, "seed": target["params"]["seed"], "guidance": 4.0, "steps": 8, **size}
    written = prompt_graph(NODE_TYPE, "f", params, prompt)
    written["nodes"].insert(
        0, {"id": "l", "type": "input/lora", "params": {"name": TURBO, "strength": 1.0}}
    )
    written["nodes"][-1]["inputs"]["loras"] = [{"from": "l", "output": "lora"}]
    assert np.array_equal(imported, rendered(client, written, "f"))
    plain = rendered(client, prompt_graph(NODE_TYPE, "f", params, prompt), "f")
    assert np.abs(imported - plain).max() > 10  # the LoRA is applied


def test_flux_guidance_off_the_nodes_chain_imports_onto_conditioning_guidance(
    client: TestClient,
) -> None:
    """A dev img2img on a split Flux2Scheduler schedule maps onto the primitives, FluxGuidance
    onto `conditioning/guidance`, and renders the graph written by hand at that guidance."""
    asset = upload(client, 64, 64)
    split = {"class_type": "SplitSigmasDenoise", "inputs": {"denoise": 0.5}}
    workflow = img2img(scheduler(64), split, 1)
    workflow["1"]["inputs"]["unet_name"] = "flux2_dev_fp8mixed.safetensors"
    workflow["2"]["inputs"]["clip_name"] = "mistral_3_small_flux2_bf16.safetensors"
    workflow["30"] = {"class_type": "FluxGuidance",
                      "inputs": {"conditioning": ["4", 0], "guidance": 5.0}}  # fmt: skip
    workflow["6"]["inputs"]["conditioning"] = ["30", 0]
    response = import_comfy(client, workflow, MODELS, assets={"photo.png": asset})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["changesPicture"] == []
    [guidance] = [n for n in body["graph"]["nodes"] if n["type"] == "conditioning/guidance"]
    assert guidance["params"]["guidance"] == 5.0

    by_hand = Graph(DEV, encoder=ENCODER)
    photo = by_hand.add("photo", "input/image", {"asset": {"ref": "asset", "id": asset}})
    encode = by_hand.add("encode", "vae/encode", vae=edge("vae", "vae"), image=edge(photo, "image"))
    by_hand.add("guided", "conditioning/guidance", {"guidance": 5.0},
                conditioning=by_hand.encode("prompt", PROMPT))  # fmt: skip
    by_hand.add("s", "sample", {"seed": 7, "steps": 4, "start_step": 2},
                latent=edge(encode, "latent"), model=edge("model", "model"),
                positive=edge("guided", "conditioning"))  # fmt: skip
    by_hand.decode(edge("s", "latent"))
    ours = rendered(client, body["graph"], body["target"])
    assert np.array_equal(ours, rendered(client, by_hand.json(), "decode"))
    [written] = [n for n in by_hand.nodes if n["id"] == "guided"]
    written["params"]["guidance"] = 3.5  # ComfyUI's default: another picture
    assert not np.array_equal(ours, rendered(client, by_hand.json(), "decode"))
