"""A family's own node, collapsed from ComfyUI's template chain by its recipe's data alone: an edit
model's chain (ModelSamplingAuraFlow and CFGNorm on the model's way, a text encoder that takes a
reference image) onto one node, as a family's `OwnNode` declares it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from inline_core.contract.comfy_recipe import Encoder, Latent, NodeNames, OwnNode, Sink
from inline_core.errors import InvalidRequest
from inline_core.graph.descriptor import NodeDescriptor, ParamSpec, ParamWidget, PortSpec
from inline_core.graph.schema import Graph, PortKind
from inline_core.importer.comfy import vocabulary
from inline_core.importer.dropped import UnsupportedNode
from inline_core.importer.handlers import CORE
from inline_core.importer.mapper import Mapper
from inline_core.importer.own_node import Collapse
from inline_core.importer.workflow import read_api
from inline_core.models.catalog import Catalog

Json = dict[str, Any]
EDIT = "test/edit"
FILES = {
    "diffusion_models": "edit.safetensors",
    "text_encoders": "te.safetensors",
    "vae": "ae.safetensors",
}


def number(name: str, default: float) -> ParamSpec:
    return ParamSpec(name, ParamWidget.NUMBER, default)


NODE = NodeDescriptor(
    type=EDIT,
    title="Edit (test)",
    category="image/edit",
    inputs=(
        PortSpec("prompt", PortKind.TEXT),
        PortSpec("reference", PortKind.IMAGE, optional=True),
        PortSpec("loras", PortKind.LORA, optional=True, multiple=True),
    ),
    outputs=(PortSpec("image", PortKind.IMAGE),),
    params=(
        ParamSpec("negative_prompt", ParamWidget.TEXTAREA, ""),
        number("width", 1024),
        number("height", 1024),
        number("steps", 20),
        number("true_cfg", 4.0),
        number("shift", 3.0),
        number("cfg_norm", 1.0),
        ParamSpec("seed", ParamWidget.SEED, -1),
        ParamSpec("model", ParamWidget.SELECT, None, options_from="diffusion_models"),
        ParamSpec("vae", ParamWidget.SELECT, None, options_from="vae"),
        ParamSpec("text_encoder", ParamWidget.SELECT, None, options_from="text_encoders"),
    ),
)
RECIPE = OwnNode(
    node=EDIT,
    sinks={"SaveImage": Sink("images")},
    latents={"EmptySD3LatentImage": Latent({"width": "width", "height": "height"})},
    samplers=("euler",),
    model_nodes={"ModelSamplingAuraFlow": {"shift": "shift"}, "CFGNorm": {"strength": "cfg_norm"}},
    encoders={"TextEncodeQwenImageEditPlus": Encoder("prompt", images={"image1": "reference"})},
    names=NodeNames(guidance="true_cfg"),
)


def edit_workflow(negative_image: str | None = "20", sampler: str = "euler") -> Json:
    def encode(text: str, image: str | None) -> Json:
        inputs: Json = {"clip": ["2", 0], "vae": ["6", 0], "prompt": text}
        if image is not None:
            inputs["image1"] = [image, 0]
        return {"class_type": "TextEncodeQwenImageEditPlus", "inputs": inputs}

    return {
        "1": {"class_type": "UNETLoader", "inputs": {"unet_name": FILES["diffusion_models"]}},
        "11": {"class_type": "ModelSamplingAuraFlow", "inputs": {"model": ["1", 0], "shift": 2.5}},
        "12": {"class_type": "CFGNorm", "inputs": {"model": ["11", 0], "strength": 0.8}},
        "2": {"class_type": "CLIPLoader", "inputs": {"clip_name": FILES["text_encoders"]}},
        "6": {"class_type": "VAELoader", "inputs": {"vae_name": FILES["vae"]}},
        "20": {"class_type": "LoadImage", "inputs": {"image": "cat.png"}},
        "21": {"class_type": "LoadImage", "inputs": {"image": "dog.png"}},
        "4": encode("make it blue", "20"),
        "5": encode("", negative_image),
        "7": {"class_type": "EmptySD3LatentImage", "inputs": {"width": 512, "height": 768}},
        "8": {
            "class_type": "KSampler",
            "inputs": {
                "model": ["12", 0],
                "positive": ["4", 0],
                "negative": ["5", 0],
                "latent_image": ["7", 0],
                "seed": 7,
                "steps": 12,
                "cfg": 2.5,
                "sampler_name": sampler,
                "scheduler": "simple",
            },
        },
        "9": {"class_type": "VAEDecode", "inputs": {"samples": ["8", 0], "vae": ["6", 0]}},
        "10": {"class_type": "SaveImage", "inputs": {"images": ["9", 0]}},
    }


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    for category, name in FILES.items():
        (tmp_path / category).mkdir()
        (tmp_path / category / name).write_bytes(b"")
    return Catalog(tmp_path, ttl_s=0.0)


def collapsed(workflow: Json, catalog: Catalog) -> tuple[Mapper, str, Graph]:
    assets = {"cat.png": "sha256-cat", "dog.png": "sha256-dog"}
    descriptors = {**vocabulary(None), EDIT: NODE}
    mapper = Mapper(read_api(workflow), catalog, descriptors, assets, CORE)
    target = Collapse(mapper, "test", NODE, "refused", RECIPE).run()
    return mapper, target, mapper.graph()


def test_the_recipes_data_collapses_the_chain_onto_the_node(catalog: Catalog) -> None:
    mapper, target, graph = collapsed(edit_workflow(), catalog)
    nodes = {n.id: n for n in graph.nodes}
    node = nodes[target]
    assert node.type == EDIT and target == "c8"
    assert node.params == {
        "seed": 7,
        "steps": 12,
        "true_cfg": 2.5,
        "negative_prompt": "",
        "shift": 2.5,  # ModelSamplingAuraFlow's
        "cfg_norm": 0.8,  # CFGNorm's
        "model": FILES["diffusion_models"],
        "width": 512,
        "height": 768,
        "vae": FILES["vae"],
        "text_encoder": FILES["text_encoders"],
    }
    prompt = nodes[node.inputs["prompt"][0].source]
    assert prompt.params == {"text": "make it blue"}
    reference = nodes[node.inputs["reference"][0].source]
    assert (reference.type, reference.params) == (
        "input/image",
        {"asset": {"ref": "asset", "id": "sha256-cat"}},
    )
    assert mapper.warnings == [] and mapper.changes == {}
    # Everything on the chain was read: only the image nothing uses is left over.
    assert [s.node_id for s in mapper.skipped_list()] == ["21"]


def test_a_negative_prompt_on_another_image_is_refused(catalog: Catalog) -> None:
    with pytest.raises(UnsupportedNode, match="another image than the positive prompt's"):
        collapsed(edit_workflow(negative_image="21"), catalog)


def test_a_sampler_the_node_does_not_offer_is_refused_naming_the_closest(
    catalog: Catalog,
) -> None:
    with pytest.raises(InvalidRequest) as refused:
        collapsed(edit_workflow(sampler="euler_ancestral"), catalog)
    assert refused.value.status == 422
    assert "'euler_ancestral' is not offered here; the closest offered is 'euler'" in str(
        refused.value
    )
