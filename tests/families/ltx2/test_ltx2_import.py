"""ComfyUI's LTX-2 workflows through `POST /v1/import/comfy`, by the family's own recipe
(`families/ltx2/comfy.py`): the official text-to-video template's two stages import as one
`lightricks/ltx-2` node with `upscale` (its distilled LoRA on the refining pass), and so does
its first stage alone; cut down, both render what the graph written by hand renders from
ComfyUI's all-in-one file; the image-to-video template imports and renders the same way, its
second sampler the node's `refine_sampler`, and so does the distilled one, its first pass's
ManualSigmas the node's `sigmas`. LTXAVTextEncoderLoader's Gemma file is the node's
`text_encoder` (a folder, or an fp4_mixed file), one that is no Gemma 3 refused naming it.
LTX-Video 0.9's own template still reads as LTX-Video's. Nothing is queued by a refusal."""

from __future__ import annotations

import io
import shutil
from collections.abc import Iterator
from typing import Any

import av
import numpy as np
import pytest
from fastapi.testclient import TestClient
from ltx2_harness import first_frame_image

from inline_core.config import Config
from inline_core.diffusion.libs import save_safetensors, transformers
from inline_core.families.ltx2.comfy import RECIPE
from inline_core.families.ltx2.descriptor import NODE_TYPE
from inline_core.families.ltx2.kit_fp4 import fp4_mixed_state
from inline_core.families.ltx2.kit_gemma import comfy_gemma_state
from inline_core.families.ltx2.kit_single_file import (
    DISTILLED_LORA,
    ENCODER_FOLDER,
    FILE,
    UPSAMPLER_FOLDER,
    SingleFileKit,
    write_single_file_kit,
)
from inline_core.importer.ui_format import read_ui
from inline_core.importer.workflow import Link
from inline_core.server.app import create_app
from tests.families.import_harness import finished, target_of, template
from tests.server.server_support import prompt_graph

Json = dict[str, Any]
CHECKPOINT = "ltx-2-19b-dev-fp8.safetensors"
GEMMA = "gemma_3_12B_it_fp4_mixed.safetensors"  # every official template's LTXAVTextEncoderLoader
NOT_GEMMA = "umt5_xxl_fp8.safetensors"  # a file in text_encoders/ that is no Gemma 3
FP4_GEMMA = "gemma_3_12B_it_fp4_mixed_tiny.safetensors"  # the kit's Gemma, NVFP4 layers
LTX25_GEMMA = "text_encoder_ltx.safetensors"  # keys of ComfyUI's LTX-2.5 Gemma 4 file, no "gemma4"
# The second stage: its sampler, guider, sigmas, noise, LoRA, upsampler and their latents.
SECOND_STAGE = ("70", "82", "83", "84", "76", "81", "98", "73", "66", "67", "68")


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    root = tmp_path_factory.mktemp("ltx2_import")
    kit: SingleFileKit = write_single_file_kit(root / "models")
    shutil.copy(kit.root / "loras" / DISTILLED_LORA, kit.root / "text_encoders" / NOT_GEMMA)
    encoder = transformers().Gemma3ForConditionalGeneration.from_pretrained(str(kit.encoder))
    fp4 = fp4_mixed_state(comfy_gemma_state(encoder, None))
    save_safetensors(fp4, kit.root / "text_encoders" / FP4_GEMMA)
    save_safetensors(ltx25_gemma_keys(), kit.root / "text_encoders" / LTX25_GEMMA)
    config = Config(models_dir=kit.root, data_dir=root / "data", profile="cpu", dtype="float32")
    with TestClient(create_app(config)) as c:
        yield c


def test_the_official_t2v_template_imports_its_two_stages_as_the_node_s_upscale(
    client: TestClient,
) -> None:
    response = client.post("/v1/import/comfy", json={"workflow": template("video_ltx2_t2v.json")})
    assert response.status_code == 200, response.text
    body = response.json()
    target, nodes = target_of(body)
    params = target["params"]
    # The first pass at 1280x720 halved (640x360, its latents 20x11), upsampled twice.
    assert (params["width"], params["height"], params["frames"]) == (1280, 704, 121)
    assert params["upscale"] is True
    assert params["upscale_model"] == "ltx-2-spatial-upscaler-x2-1.0.safetensors"
    assert (params["steps"], params["seed"], params["guidance"]) == (20, 10, 4.0)
    assert params["sampler"] == "euler_ancestral" and params["model"] == CHECKPOINT
    lora = nodes[target["inputs"]["loras"]["from"]]
    assert lora["params"] == {
        "name": "ltx-2-19b-distilled-lora-384.safetensors",
        "strength": 1.0,
        "expert": "low",  # on the refining sampler's model only
    }
    assert [c["reason"] for c in body["changesPicture"]] == [
        "its noise seed is not the first's: the refining pass draws its noise from the node's seed"
    ]


def test_the_distilled_template_s_first_pass_is_the_node_s_sigmas(client: TestClient) -> None:
    response = client.post(
        "/v1/import/comfy", json={"workflow": template("video_ltx2_t2v_distilled.json")}
    )
    assert response.status_code == 200, response.text
    params = target_of(response.json())[0]["params"]
    assert params["sigmas"] == "1., 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875, 0.0"
    assert (params["steps"], params["guidance"], params["upscale"]) == (8, 1.0, True)


def test_a_refining_sampler_of_its_own_is_the_node_s_refine_sampler(client: TestClient) -> None:
    """The image-to-video template's second sampler (gradient_estimation), on the t2v chain."""
    changes = {("66", "sampler_name"): "gradient_estimation"}
    workflow = api_prompt("video_ltx2_t2v.json", changes, cut=False)
    response = client.post("/v1/import/comfy", json={"workflow": workflow})
    assert response.status_code == 200, response.text
    params = target_of(response.json())[0]["params"]
    assert (params["sampler"], params["refine_sampler"]) == (
        "euler_ancestral",
        "gradient_estimation",
    )
    assert params["upscale"] is True


def test_a_cfg_pp_first_sampler_imports_onto_the_node(client: TestClient) -> None:
    """The first pass runs CFG (CFGGuider's cfg 4), so its CFG++ sampler is the node's; the
    refining pass stays on its own plain sampler."""
    workflow = api_prompt("video_ltx2_t2v.json", {("8", "sampler_name"): "euler_cfg_pp"}, cut=False)
    response = client.post("/v1/import/comfy", json={"workflow": workflow})
    assert response.status_code == 200, response.text
    params = target_of(response.json())[0]["params"]
    assert (params["sampler"], params["refine_sampler"]) == ("euler_cfg_pp", "euler_ancestral")


def api_prompt(
    name: str, changes: dict[tuple[str, str], Any] | None = None, *, cut: bool = True
) -> Json:
    """The template in ComfyUI's API format (`cut`: its second stage cut, the first sampler's
    latents decoded). `changes`: (node id in the subgraph, widget) -> value."""
    orders = {name: spec.widgets for name, spec in RECIPE.classes.items()}
    workflow = read_ui(template(name), orders)
    group = next(i.partition(":")[0] for i in workflow.nodes if ":" in i)
    prompt: Json = {}
    for node_id, node in workflow.nodes.items():
        inputs = {k: [v.node, v.slot] if isinstance(v, Link) else v for k, v in node.inputs.items()}
        prompt[node_id] = {"class_type": node.class_type, "inputs": inputs}
    if cut:
        for inner in SECOND_STAGE:
            prompt.pop(f"{group}:{inner}", None)
        first = f"{group}:80"  # the first sampler's latents, separated
        prompt[f"{group}:100"]["inputs"]["samples"] = [first, 0]
        prompt[f"{group}:101"]["inputs"]["samples"] = [first, 1]
    for (inner, widget), value in (changes or {}).items():
        prompt[f"{group}:{inner}"]["inputs"][widget] = value
    return prompt


def test_the_t2v_template_s_first_stage_imports_as_one_node_with_its_params(
    client: TestClient,
) -> None:
    response = client.post("/v1/import/comfy", json={"workflow": api_prompt("video_ltx2_t2v.json")})
    assert response.status_code == 200, response.text
    body = response.json()
    target, nodes = target_of(body)
    assert target["type"] == NODE_TYPE
    params = target["params"]
    # EmptyImage 1280x720 scaled by 0.5, measured by GetImageSize: the first stage's size, its
    # height 360 rendered as ComfyUI's latent of 360 // 32 rows renders it.
    assert (params["width"], params["height"], params["frames"]) == (640, 352, 121)
    assert (params["fps"], params["steps"], params["seed"]) == (24, 20, 10)
    assert (params["guidance"], params["audio_guidance"]) == (4.0, 4.0)
    assert (params["sampler"], params["schedule"]) == ("euler_ancestral", "simple")
    assert params["model"] == CHECKPOINT and params["format"] == "mp4"
    assert params["negative_prompt"].startswith("blurry, low quality")
    prompt = nodes[target["inputs"]["prompt"]["from"]]["params"]["text"]
    assert prompt.startswith("A close-up of a cheerful girl puppet")
    # LTXAVTextEncoderLoader's Gemma 3 file, not here: named as written, for the models to map.
    assert params["text_encoder"] == GEMMA
    (unmatched,) = body["unmatchedModels"][-1:]
    assert (unmatched["category"], unmatched["file"]) == ("text_encoders", GEMMA)
    assert body["changesPicture"] == []


@pytest.mark.parametrize("mapped", [ENCODER_FOLDER, FP4_GEMMA], ids=["folder", "fp4-file"])
def test_the_gemma_mapped_is_the_node_s_text_encoder(client: TestClient, mapped: str) -> None:
    """A Gemma 3 folder, or ComfyUI's fp4_mixed file (its NVFP4 layers read)."""
    body_in = {"workflow": api_prompt("video_ltx2_t2v.json"), "models": {GEMMA: mapped}}
    response = client.post("/v1/import/comfy", json=body_in)
    assert response.status_code == 200, response.text
    assert target_of(response.json())[0]["params"]["text_encoder"] == mapped


@pytest.mark.parametrize(
    ("changes", "models", "said"),
    [
        (
            {},
            {GEMMA: NOT_GEMMA},
            f"the text encoder text_encoders/{NOT_GEMMA} cannot be read: it is not ComfyUI's "
            "Gemma 3 file",
        ),
        (
            {},
            {GEMMA: LTX25_GEMMA},
            f"the text encoder text_encoders/{LTX25_GEMMA} cannot be read: it is ComfyUI's "
            "LTX-2.5 Gemma 4 file",
        ),
        (
            {("60", "text_encoder"): "gemma4-12b-with-proj-ltx-2.5-comfy-int8-convrot.safetensors"},
            {},
            "'gemma4-12b-with-proj-ltx-2.5-comfy-int8-convrot.safetensors' is Gemma 4, "
            "LTX-2.5's text encoder",
        ),
    ],
)
def test_a_gemma_it_cannot_serve_is_refused_naming_it(
    client: TestClient, changes: dict[tuple[str, str], Any], models: dict[str, str], said: str
) -> None:
    body_in = {"workflow": api_prompt("video_ltx2_t2v.json", changes), "models": models}
    response = client.post("/v1/import/comfy", json=body_in)
    assert response.status_code == 422, response.text
    message = response.json()["error"]["message"]
    assert "LTXAVTextEncoderLoader" in message and said in message, message


def ltx25_gemma_keys() -> dict[str, Any]:
    """Tiny tensors under the keys ComfyUI's LTX-2.5 Gemma 4 file holds (`comfy_ltx25.py`)."""
    import torch

    names = ["model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight"]
    for stream in ("video", "audio"):
        names += [
            f"text_embedding_projection.{stream}_aggregate_embed.{p}" for p in ("weight", "bias")
        ]
    return {name: torch.zeros(2, 2) for name in names}


def decoded(client: TestClient, state: Json) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The video take's frames and its soundtrack, decoded."""
    video = next(t for t in state["takes"] if t["kind"] == "video")
    with av.open(io.BytesIO(client.get(video["uri"]).content), "r") as container:
        frames = np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])
    with av.open(io.BytesIO(client.get(video["uri"]).content), "r") as container:
        sound = np.concatenate([f.to_ndarray() for f in container.decode(audio=0)], axis=-1)
    return frames, sound


def rendered(client: TestClient, graph: Json, target: str) -> Json:
    run = client.post("/v1/runs", json={"graph": graph, "target": target})
    assert run.status_code == 201, run.text
    state = finished(client, str(run.json()["runId"]), seconds=300)
    assert state["status"] == "done", state
    return state


def test_the_first_stage_renders_what_the_hand_written_graph_renders(client: TestClient) -> None:
    small: dict[tuple[str, str], Any] = {
        ("89", "width"): 64,
        ("89", "height"): 64,
        ("62", "value"): 9,
        ("9", "steps"): 2,
    }
    workflow = api_prompt("video_ltx2_t2v.json", small)
    models = {CHECKPOINT: FILE, GEMMA: ENCODER_FOLDER}
    response = client.post("/v1/import/comfy", json={"workflow": workflow, "models": models})
    assert response.status_code == 200, response.text
    body = response.json()
    target, nodes = target_of(body)
    params = dict(target["params"])
    assert (params["width"], params["height"], params["frames"], params["model"]) == (
        32,
        32,
        9,
        FILE,
    )
    imported = decoded(client, rendered(client, body["graph"], body["target"]))
    prompt = nodes[target["inputs"]["prompt"]["from"]]["params"]["text"]
    written = decoded(client, rendered(client, prompt_graph(NODE_TYPE, "l", params, prompt), "l"))
    assert imported[0].shape == (9, 32, 32, 3)
    assert np.array_equal(imported[0], written[0])
    assert np.array_equal(imported[1], written[1])


def test_ltx_video_s_template_is_still_ltx_video_s(client: TestClient) -> None:
    response = client.post(
        "/v1/import/comfy", json={"workflow": template("ltxv_text_to_video.json")}
    )
    assert response.status_code == 422, response.text
    message = response.json()["error"]["message"]
    assert message.startswith("this workflow is built for LTX-Video")
    assert "Inline Core has no LTX-Video family yet" in message


SMALL: dict[tuple[str, str], Any] = {
    ("89", "width"): 64,
    ("89", "height"): 64,
    ("62", "value"): 9,
    ("9", "steps"): 2,
}
# The distilled template: its own size and length nodes; its first pass on its 8 sigmas.
SMALL_DISTILLED: dict[tuple[str, str], Any] = {
    ("131", "width"): 64,
    ("131", "height"): 64,
    ("113", "value"): 9,
}


@pytest.mark.parametrize(
    "name", ["video_ltx2_t2v.json", "video_ltx2_i2v.json", "video_ltx2_t2v_distilled.json"]
)
def test_the_two_stage_template_renders_what_the_hand_written_graph_renders(
    client: TestClient, name: str
) -> None:
    """The official templates, cut down for a CPU (a 64x64 take, 9 frames, 2 first-pass steps),
    their files mapped onto the tiny all-in-one file, upsampler and LoRA; image to video's
    picture an uploaded asset, its second sampler (gradient_estimation) the `refine_sampler`."""
    distilled = name == "video_ltx2_t2v_distilled.json"
    small = SMALL_DISTILLED if distilled else SMALL
    models = {
        CHECKPOINT: FILE,
        "ltx-2-19b-distilled.safetensors": FILE,
        "ltx-2-spatial-upscaler-x2-1.0.safetensors": UPSAMPLER_FOLDER,
        "ltx-2-19b-distilled-lora-384.safetensors": DISTILLED_LORA,
        GEMMA: ENCODER_FOLDER,
    }
    buf = io.BytesIO()
    first_frame_image(48, 40, seed=5).save(buf, format="PNG")
    uploaded = client.post(
        "/v1/assets", content=buf.getvalue(), headers={"content-type": "image/png"}
    )
    assets = {"freckled_curly_girl.png": str(uploaded.json()["id"])}
    workflow = api_prompt(name, small, cut=False)
    body_in = {"workflow": workflow, "models": models, "assets": assets}
    response = client.post("/v1/import/comfy", json=body_in)
    assert response.status_code == 200, response.text
    body = response.json()
    target, nodes = target_of(body)
    params = dict(target["params"])
    assert (params["width"], params["height"], params["upscale"]) == (64, 64, True)
    assert params["upscale_model"] == UPSAMPLER_FOLDER and params["text_encoder"] == ENCODER_FOLDER
    if not distilled:
        lora_params: Json = nodes[target["inputs"]["loras"]["from"]]["params"]
        assert lora_params["name"] == DISTILLED_LORA and lora_params["expert"] == "low"
    assert bool(params.get("sigmas")) == distilled
    from_image = "image" in target["inputs"]
    assert from_image == (name == "video_ltx2_i2v.json")
    if from_image:
        assert (params["sampler"], params["refine_sampler"]) == ("euler", "gradient_estimation")
    imported = decoded(client, rendered(client, body["graph"], body["target"]))
    prompt = nodes[target["inputs"]["prompt"]["from"]]["params"]["text"]
    graph = prompt_graph(NODE_TYPE, "l", params, prompt)
    for port, output in (("loras", "lora"), ("image", "image")):  # the imported input nodes
        if port in target["inputs"]:
            graph["nodes"].insert(0, {**nodes[target["inputs"][port]["from"]], "id": port})
            graph["nodes"][-1]["inputs"][port] = {"from": port, "output": output}
    written = decoded(client, rendered(client, graph, "l"))
    assert imported[0].shape == (9, 64, 64, 3)
    assert np.array_equal(imported[0], written[0])
    assert np.array_equal(imported[1], written[1])
