"""ComfyUI's Wan 2.2 A14B two-stage sampling imports onto one `alibaba/wan` node.

The fixtures are small chains of the official 14B templates' node set (`video_wan2_2_14B_t2v`,
`video_wan2_2_14B_i2v`): two UNETLoaders (high- and low-noise), each through its own
LoraLoaderModelOnly (the lightx2v LoRAs come one file per expert) and ModelSamplingSD3 into its
own KSamplerAdvanced, the first (add_noise enable, start 0, end k, leftover noise enable)
feeding the second (add_noise disable, start k, end N), then VAEDecode, CreateVideo and
SaveVideo (or SaveAnimatedWEBP, for exact frames). In both ComfyUI formats the chain becomes the
node with the high-noise file as `model`, `switch_step` k, the first stage's cfg and noise_seed
as `guidance` and `seed`, the second's cfg as `guidance_2`, and each stage's LoRAs on its expert;
it renders the hand-written graph's frames. Stages that do not chain so are refused naming the
node; two different shifts are a warning naming the one used. The official templates themselves
import too: their LoRA toggle (`ComfySwitchNode`, set by one PrimitiveBoolean) is decided as the
workflow is read.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, cast

import pytest
from fastapi.testclient import TestClient
from test_wan_a14b_loras import expert_graph
from test_wan_import import PARTS, rendered_alike, template, upload
from test_wan_server import wan_graph

from inline_core.families.wan.kit import WanKit
from inline_core.importer.widgets import CONTROL_AFTER_GENERATE, OUTPUT_TYPES, WIDGET_ORDER
from inline_core.importer.workflow import Link
from tests.families.import_harness import import_comfy as import_workflow
from tests.families.import_harness import target_of
from tests.importer.comfy_workflows import LinkRow, ui_node, wire

Json = dict[str, Any]
PROMPT = "a paper boat on a rainy street"
T2V = ("wan2.2_t2v_high_noise_14B_fp16.safetensors", "wan2.2_t2v_low_noise_14B_fp16.safetensors")
I2V = ("wan2.2_i2v_high_noise_14B_fp16.safetensors", "wan2.2_i2v_low_noise_14B_fp16.safetensors")
MODELS = {
    T2V[0]: "wan2.2_t2v_high_noise_tiny_fp32.safetensors",
    T2V[1]: "wan2.2_t2v_low_noise_tiny_fp32.safetensors",
    I2V[0]: "wan2.2_i2v_high_noise_tiny_fp32.safetensors",
    I2V[1]: "wan2.2_i2v_low_noise_tiny_fp32.safetensors",
    **PARTS,
}
STEPS, SWITCH = 4, 2


def two_stages(kit: WanKit, *, i2v: bool = False, sink: str = "webp") -> Json:
    """The 14B template's chain in the API format, at a size a CPU test renders."""
    high, low = I2V if i2v else T2V
    nodes: Json = {
        "75": {"class_type": "UNETLoader",
               "inputs": {"unet_name": high, "weight_dtype": "default"}},
        "76": {"class_type": "UNETLoader",
               "inputs": {"unet_name": low, "weight_dtype": "default"}},
        "71": {"class_type": "CLIPLoader",
               "inputs": {"clip_name": "umt5_xxl_fp8_e4m3fn_scaled.safetensors", "type": "wan",
                          "device": "default"}},
        "73": {"class_type": "VAELoader", "inputs": {"vae_name": "wan_2.1_vae.safetensors"}},
        "83": {"class_type": "LoraLoaderModelOnly",
               "inputs": {"lora_name": kit.loras["a-comfy"].name, "strength_model": 1.0,
                          "model": ["75", 0]}},
        "85": {"class_type": "LoraLoaderModelOnly",
               "inputs": {"lora_name": kit.loras["b"].name, "strength_model": 1.5,
                          "model": ["76", 0]}},
        "82": {"class_type": "ModelSamplingSD3", "inputs": {"shift": 5.0, "model": ["83", 0]}},
        "86": {"class_type": "ModelSamplingSD3", "inputs": {"shift": 5.0, "model": ["85", 0]}},
        "89": {"class_type": "CLIPTextEncode", "inputs": {"text": PROMPT, "clip": ["71", 0]}},
        "72": {"class_type": "CLIPTextEncode", "inputs": {"text": "blurry", "clip": ["71", 0]}},
        "81": {"class_type": "KSamplerAdvanced",
               "inputs": {"add_noise": "enable", "noise_seed": 11, "steps": STEPS, "cfg": 3.5,
                          "sampler_name": "euler", "scheduler": "simple", "start_at_step": 0,
                          "end_at_step": SWITCH, "return_with_leftover_noise": "enable",
                          "model": ["82", 0], "positive": ["89", 0], "negative": ["72", 0],
                          "latent_image": ["74", 0]}},
        "78": {"class_type": "KSamplerAdvanced",
               "inputs": {"add_noise": "disable", "noise_seed": 0, "steps": STEPS, "cfg": 1.0,
                          "sampler_name": "euler", "scheduler": "simple",
                          "start_at_step": SWITCH, "end_at_step": 10000,
                          "return_with_leftover_noise": "disable", "model": ["86", 0],
                          "positive": ["89", 0], "negative": ["72", 0],
                          "latent_image": ["81", 0]}},
        "87": {"class_type": "VAEDecode", "inputs": {"samples": ["78", 0], "vae": ["73", 0]}},
    }  # fmt: skip
    size = {"width": 48, "height": 32, "length": 9, "batch_size": 1}
    if i2v:
        nodes["97"] = {"class_type": "LoadImage", "inputs": {"image": "start.png"}}
        nodes["98"] = {
            "class_type": "WanImageToVideo",
            "inputs": {"positive": ["89", 0], "negative": ["72", 0], "vae": ["73", 0],
                       "start_image": ["97", 0], **size},
        }  # fmt: skip
        for stage in ("81", "78"):
            stage_inputs = nodes[stage]["inputs"]
            stage_inputs.update(positive=["98", 0], negative=["98", 1])
        nodes["81"]["inputs"]["latent_image"] = ["98", 2]
    else:
        nodes["74"] = {"class_type": "EmptyHunyuanLatentVideo", "inputs": size}
    if sink == "webp":
        nodes["80"] = {"class_type": "SaveAnimatedWEBP",
                       "inputs": {"images": ["87", 0], "filename_prefix": "wan", "fps": 16,
                                  "lossless": False, "quality": 90,
                                  "method": "default"}}  # fmt: skip
    else:
        nodes["88"] = {"class_type": "CreateVideo", "inputs": {"images": ["87", 0], "fps": 16}}
        nodes["80"] = {"class_type": "SaveVideo",
                       "inputs": {"video": ["88", 0], "filename_prefix": "video/ComfyUI",
                                  "format": "auto", "codec": "auto"}}  # fmt: skip
    return nodes


def as_ui(api: Json) -> Json:
    """An API-format workflow as ComfyUI's frontend saves it: widgets in each class's order,
    links as rows."""
    nodes: list[Json] = []
    links: list[LinkRow] = []
    targets: list[tuple[int, str, Link]] = []
    for node_id, node in api.items():
        kind: str = node["class_type"]
        values: Json = node["inputs"]
        widgets = [
            "fixed" if name == CONTROL_AFTER_GENERATE else values.get(name, "image")
            for name in WIDGET_ORDER[kind]
        ]
        inputs: list[tuple[str, str]] = []
        for name, value in values.items():
            if isinstance(value, list):  # a link: [source id, slot]
                source, slot = cast(tuple[str, int], tuple(cast(list[Any], value)))
                inputs.append((name, OUTPUT_TYPES[api[source]["class_type"]][slot]))
                targets.append((int(node_id), name, Link(source, slot)))
        outputs = [(t.lower(), t) for t in OUTPUT_TYPES.get(kind, ())]
        nodes.append(ui_node(int(node_id), kind, inputs=inputs, outputs=outputs, widgets=widgets))
    by_id = {n["id"]: n for n in nodes}
    for link_id, (target, name, link) in enumerate(targets, start=1):
        slot = [i["name"] for i in by_id[target]["inputs"]].index(name)
        kind = by_id[target]["inputs"][slot]["type"]
        links.append((link_id, int(link.node), link.slot, target, slot, kind))
    return {
        "id": "0e6c6a52-4d7b-4f6e-9c59-1b0b8d4b2a14",
        "revision": 0,
        "last_node_id": max(by_id),
        "last_link_id": len(links),
        "nodes": nodes,
        "links": wire(nodes, links),
        "groups": [],
        "config": {},
        "extra": {},
        "version": 0.4,
    }


def import_comfy(client: TestClient, workflow: Any, **extra: Any) -> Any:
    return import_workflow(client, workflow, MODELS, **extra)


@pytest.mark.parametrize("ui", [False, True], ids=["api", "ui"])
def test_two_stages_import_as_one_wan_node_switched_at_the_stages_step(
    client: TestClient, wan_kit: WanKit, ui: bool
) -> None:
    workflow = two_stages(wan_kit, sink="video")
    response = import_comfy(client, as_ui(workflow) if ui else workflow)
    assert response.status_code == 200, response.text
    body = response.json()
    target, nodes = target_of(body)
    assert target["type"] == "alibaba/wan"
    expected = {"model": MODELS[T2V[0]], "steps": STEPS, "switch_step": SWITCH, "guidance": 3.5,
                "guidance_2": 1.0, "shift": 5.0, "seed": 11, "width": 48, "height": 32,
                "frames": 9, "fps": 16, "format": "mp4", "negative_prompt": "blurry",
                "sampler": "euler", "schedule": "simple"}  # fmt: skip
    assert {k: target["params"].get(k) for k in expected} == expected
    loras = [nodes[edge["from"]]["params"] for edge in target["inputs"]["loras"]]
    assert loras == [
        {"name": wan_kit.loras["a-comfy"].name, "strength": 1.0, "expert": "high"},
        {"name": wan_kit.loras["b"].name, "strength": 1.5, "expert": "low"},
    ]
    skipped = {s["classType"]: s["reason"] for s in body["skipped"]}
    assert "low-noise sibling" in skipped["UNETLoader"]
    assert body["changesPicture"] == []  # euler has no history to carry across the switch
    assert not any("shifts differ" in w for w in body["warnings"])
    submitted = client.post("/v1/runs", json={"graph": body["graph"], "target": body["target"]})
    assert submitted.status_code == 201, submitted.text  # it validates as it stands
    client.delete(f"/v1/runs/{submitted.json()['runId']}")


def by_hand(kit: WanKit, model: str, image: str | None = None) -> Json:
    stack = [("a-comfy", "high", 1.0), ("b", "low", 1.5)]
    graph = expert_graph(kit, model, stack)
    node = graph["nodes"][-1]
    node["params"].update(
        steps=STEPS, switch_step=SWITCH, guidance=3.5, guidance_2=1.0, shift=5.0, seed=11,
        fps=16, negative_prompt="blurry", format="png", sampler="euler", schedule="simple",
        vae=PARTS["wan_2.1_vae.safetensors"],  # the workflow's files, as the import names them
        text_encoder=PARTS["umt5_xxl_fp8_e4m3fn_scaled.safetensors"],
    )  # fmt: skip
    if image is not None:
        plain = wan_graph(PROMPT, image=image)
        graph["nodes"].insert(0, plain["nodes"][1])
        node["inputs"]["image"] = {"from": "i", "output": "image"}
    return graph


def test_an_imported_two_stage_workflow_renders_the_hand_written_graphs_frames(
    client: TestClient, wan_kit: WanKit
) -> None:
    response = import_comfy(client, two_stages(wan_kit))
    assert response.status_code == 200, response.text
    for take in rendered_alike(client, response.json(), by_hand(wan_kit, MODELS[T2V[0]])):
        assert take["params"]["switch_step"] == SWITCH and take["params"]["guidance_2"] == 1.0


def test_an_imported_two_stage_image_to_video_ui_workflow_renders_alike(
    client: TestClient, wan_kit: WanKit
) -> None:
    asset = upload(client)
    workflow = as_ui(two_stages(wan_kit, i2v=True))
    response = import_comfy(client, workflow, assets={"start.png": asset})
    assert response.status_code == 200, response.text
    body = response.json()
    target, nodes = target_of(body)
    assert nodes[target["inputs"]["image"]["from"]]["params"]["asset"]["id"] == asset
    for take in rendered_alike(client, body, by_hand(wan_kit, MODELS[I2V[0]], asset)):
        assert take["params"]["image_to_video"] is True


def test_two_different_shifts_are_a_warning_naming_the_one_used(
    client: TestClient, wan_kit: WanKit
) -> None:
    workflow = two_stages(wan_kit)
    workflow["86"]["inputs"]["shift"] = 8.0
    response = import_comfy(client, workflow)
    assert response.status_code == 200, response.text
    body = response.json()
    target, _nodes = target_of(body)
    assert target["params"]["shift"] == 5.0
    (warning,) = [w for w in body["warnings"] if "shifts differ" in w]
    assert "5 on the high-noise stage, 8 on the low-noise one" in warning
    assert "at the high-noise stage's shift (5)" in warning


def test_a_noisy_sampler_on_two_seeds_lists_the_second_stages_seed(
    client: TestClient, wan_kit: WanKit
) -> None:
    workflow = two_stages(wan_kit)
    quiet = import_comfy(client, workflow).json()  # euler: the second seed is moot
    assert not [c for c in quiet["changesPicture"] if "noise_seed" in str(c)]
    for stage in ("81", "78"):
        workflow[stage]["inputs"]["sampler_name"] = "euler_ancestral"
    response = import_comfy(client, workflow)
    assert response.status_code == 200, response.text
    (change,) = [c for c in response.json()["changesPicture"] if "noise_seed" in str(c)]
    assert "noise_seed 0" in str(change) and "KSamplerAdvanced 81's 11" in str(change)


def _set(node: str, **values: Any) -> Callable[[Json], None]:
    def change(workflow: Json) -> None:
        workflow[node]["inputs"].update(values)

    return change


def _other_prompt(workflow: Json) -> None:
    workflow["90"] = {"class_type": "CLIPTextEncode", "inputs": {"text": "x", "clip": ["71", 0]}}
    workflow["78"]["inputs"]["positive"] = ["90", 0]


@pytest.mark.parametrize(
    ("change", "node", "expected"),
    [
        (_set("78", start_at_step=3), "78", "starts at step 3, not where KSamplerAdvanced 81 ends"),
        (_set("81", end_at_step=STEPS, return_with_leftover_noise="enable"), "81",
         "ends at step 4, not between 1 and 3"),
        (_set("78", end_at_step=3), "78", "ends at step 3, before the schedule's 4"),
        (_set("78", steps=6, end_at_step=6), "78", "its steps are not"),
        (_set("78", add_noise="enable"), "78", "add_noise is 'enable'"),
        (_set("81", add_noise="disable"), "81", "add_noise is 'disable'"),
        (_set("81", return_with_leftover_noise="disable"), "81", "return_with_leftover_noise"),
        (_set("81", start_at_step=1), "81", "it starts after step 0"),
        (_set("78", sampler_name="dpmpp_2m"), "78", "its sampler_name 'dpmpp_2m' is not"),
        (_set("78", scheduler="karras"), "78", "its scheduler 'karras' is not"),
        (_other_prompt, "78", "its positive prompt is not"),
        (_set("86", model=["75", 0]), "78", "both stages sample"),
    ],
)  # fmt: skip
def test_stages_that_do_not_chain_as_the_template_are_refused_naming_the_node(
    client: TestClient,
    wan_kit: WanKit,
    change: Callable[[Json], None],
    node: str,
    expected: str,
) -> None:
    workflow = copy.deepcopy(two_stages(wan_kit))
    change(workflow)
    response = import_comfy(client, workflow)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "unsupported_node", error
    assert f"KSamplerAdvanced {node}" in error["message"] and expected in error["message"], error


def test_a_lone_advanced_sampler_over_the_whole_schedule_reads_as_a_ksampler(
    client: TestClient, wan_kit: WanKit
) -> None:
    workflow = two_stages(wan_kit)
    workflow["87"]["inputs"]["samples"] = ["81", 0]
    workflow["81"]["inputs"].update(end_at_step=10000, return_with_leftover_noise="disable")
    workflow["82"]["inputs"]["model"] = ["75", 0]
    response = import_comfy(client, workflow)
    assert response.status_code == 200, response.text
    target, _nodes = target_of(response.json())
    assert target["params"]["seed"] == 11 and target["params"]["steps"] == STEPS
    assert "switch_step" not in target["params"] and "loras" not in target["inputs"]
    workflow["81"]["inputs"]["end_at_step"] = 2
    partial = import_comfy(client, workflow)
    assert partial.status_code == 422, partial.text
    assert "no second stage takes its latents" in partial.json()["error"]["message"]


OFFICIAL = {
    "wan2.2_t2v_high_noise_14B_fp8_scaled.safetensors": MODELS[T2V[0]],
    "wan2.2_i2v_high_noise_14B_fp8_scaled.safetensors": MODELS[I2V[0]],
    **PARTS,
}


def switched_on(workflow: Json) -> Json:
    """The t2v template with its 4-step LoRA switch turned on (its one PrimitiveBoolean)."""
    (subgraph,) = workflow["definitions"]["subgraphs"]
    (boolean,) = [n for n in subgraph["nodes"] if n["type"] == "PrimitiveBoolean"]
    boolean["widgets_values"] = [True]
    return workflow


@pytest.mark.parametrize(
    ("name", "lightx2v", "expected"),
    [
        ("video_wan2_2_14B_t2v.json", False, {"steps": 20, "switch_step": 10, "guidance": 3.5,
                                              "guidance_2": 3.5, "width": 640, "frames": 81}),
        ("video_wan2_2_14B_t2v.json", True, {"steps": 4, "switch_step": 2, "guidance": 1.0,
                                             "guidance_2": 1.0, "width": 640, "frames": 81}),
        ("video_wan2_2_14B_i2v.json", False, {"steps": 20, "switch_step": 10, "guidance": 3.5,
                                              "guidance_2": 3.5, "width": 640, "frames": 81}),
    ],
)  # fmt: skip
def test_the_official_14b_templates_import_with_their_switches_decided(
    client: TestClient, wan_kit: WanKit, name: str, lightx2v: bool, expected: Json
) -> None:
    """Their LoRA toggle (ComfySwitchNode, set by one PrimitiveBoolean) picks the models, steps,
    switch step and cfg; off, the LoRA loaders are off the chain; on, each expert gets its own
    lightx2v LoRA (mapped here onto the kit's)."""
    workflow = template(name)
    models = dict(OFFICIAL)
    if lightx2v:
        workflow = switched_on(workflow)
        models["wan2.2_t2v_lightx2v_4steps_lora_v1.1_high_noise.safetensors"] = wan_kit.loras[
            "a-comfy"
        ].name
        models["wan2.2_t2v_lightx2v_4steps_lora_v1.1_low_noise.safetensors"] = wan_kit.loras[
            "b"
        ].name
    assets = {}
    if "i2v" in name:
        assets = {"video_wan2_2_14B_i2v_input_image.jpg": upload(client)}
    response = client.post(
        "/v1/import/comfy", json={"workflow": workflow, "models": models, "assets": assets}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    target, nodes = target_of(body)
    assert {k: target["params"][k] for k in expected} == expected
    assert target["params"]["model"] == (MODELS[I2V[0]] if "i2v" in name else MODELS[T2V[0]])
    assert target["params"]["shift"] == pytest.approx(5.0)
    loras = [nodes[edge["from"]]["params"] for edge in target["inputs"].get("loras", [])]
    if lightx2v:
        assert [(lora["name"], lora["expert"]) for lora in loras] == [
            (wan_kit.loras["a-comfy"].name, "high"),
            (wan_kit.loras["b"].name, "low"),
        ]
    else:
        assert loras == []
    assert ("image" in target["inputs"]) is ("i2v" in name)
    skipped = [s for s in body["skipped"] if s["classType"] == "ComfySwitchNode"]
    assert skipped and all(f"switch is {str(lightx2v).lower()}" in s["reason"] for s in skipped)
    submitted = client.post("/v1/runs", json={"graph": body["graph"], "target": body["target"]})
    assert submitted.status_code == 201, submitted.text  # it validates as it stands
    client.delete(f"/v1/runs/{submitted.json()['runId']}")


def test_a_switch_no_value_decides_is_refused_naming_it(
    client: TestClient, wan_kit: WanKit
) -> None:
    workflow = two_stages(wan_kit)
    workflow["120"] = {"class_type": "ComfySwitchNode",
                       "inputs": {"switch": ["121", 0], "on_false": 20, "on_true": 4}}  # fmt: skip
    workflow["121"] = {"class_type": "RandomBoolean", "inputs": {}}
    workflow["81"]["inputs"]["steps"] = ["120", 0]
    response = import_comfy(client, workflow)
    assert response.status_code == 422, response.text
    message = response.json()["error"]["message"]
    assert "KSamplerAdvanced 81: its steps comes from ComfySwitchNode 120" in message
