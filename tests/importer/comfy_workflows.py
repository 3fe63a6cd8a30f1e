"""ComfyUI workflows for the importer tests, written from ComfyUI's documented formats.

The API format is written out literally. The UI format is built with `ui_node` + `wire`, which
produce the shape ComfyUI saves (pos, size, flags, order, mode, inputs with `link`, outputs with
`links`, properties, widgets_values) from one table of links, so the two sides always agree.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

Json = dict[str, Any]
LinkRow = tuple[int, int, int, int, int, str]  # id, origin, origin slot, target, target slot, type

ZIMAGE_MODEL = "z_image_turbo_bf16.safetensors"
ZIMAGE_ENCODER = "qwen_3_4b.safetensors"
ZIMAGE_VAE = "ae.safetensors"
PROMPT = "a red fox sitting in fresh snow, golden hour"
SUBGRAPH_ID = "f2fdebf6-dfaf-43b6-9eb2-7f70613cfdc1"


@dataclass(frozen=True)
class ZImageTemplate:
    """What a caller may change in the Z-Image template: the render tests point it at the kit's
    tiny models at a CPU-sized resolution."""

    prompt: str = PROMPT
    seed: int = 42
    width: int = 1024
    height: int = 1024
    steps: int = 8
    cfg: float = 1
    model: str = ZIMAGE_MODEL
    encoder: str = ZIMAGE_ENCODER
    vae: str = ZIMAGE_VAE


class TemplateFields(TypedDict, total=False):
    prompt: str
    seed: int
    width: int
    height: int
    steps: int
    cfg: float
    model: str
    encoder: str
    vae: str


def zimage_api(**fields: Unpack[TemplateFields]) -> Json:
    """ComfyUI's Z-Image Turbo text-to-image template, API format."""
    t = ZImageTemplate(**fields)
    return {
        "3": {
            "class_type": "KSampler",
            "inputs": {
                "seed": t.seed,
                "steps": t.steps,
                "cfg": t.cfg,
                "sampler_name": "euler",
                "scheduler": "simple",
                "denoise": 1,
                "model": ["11", 0],
                "positive": ["6", 0],
                "negative": ["7", 0],
                "latent_image": ["13", 0],
            },
            "_meta": {"title": "KSampler"},
        },
        "6": {
            "class_type": "CLIPTextEncode",
            "inputs": {"text": t.prompt, "clip": ["18", 0]},
            "_meta": {"title": "CLIP Text Encode (Positive Prompt)"},
        },
        "7": {
            "class_type": "ConditioningZeroOut",
            "inputs": {"conditioning": ["6", 0]},
            "_meta": {"title": "ConditioningZeroOut"},
        },
        "8": {
            "class_type": "VAEDecode",
            "inputs": {"samples": ["3", 0], "vae": ["17", 0]},
            "_meta": {"title": "VAE Decode"},
        },
        "9": {
            "class_type": "SaveImage",
            "inputs": {"filename_prefix": "z-image", "images": ["8", 0]},
            "_meta": {"title": "Save Image"},
        },
        "11": {
            "class_type": "ModelSamplingAuraFlow",
            "inputs": {"shift": 3, "model": ["16", 0]},
            "_meta": {"title": "ModelSamplingAuraFlow"},
        },
        "13": {
            "class_type": "EmptySD3LatentImage",
            "inputs": {"width": t.width, "height": t.height, "batch_size": 1},
            "_meta": {"title": "EmptySD3LatentImage"},
        },
        "16": {
            "class_type": "UNETLoader",
            "inputs": {"unet_name": t.model, "weight_dtype": "default"},
            "_meta": {"title": "Load Diffusion Model"},
        },
        "17": {
            "class_type": "VAELoader",
            "inputs": {"vae_name": t.vae},
            "_meta": {"title": "Load VAE"},
        },
        "18": {
            "class_type": "CLIPLoader",
            "inputs": {"clip_name": t.encoder, "type": "lumina2", "device": "default"},
            "_meta": {"title": "Load CLIP"},
        },
    }


# -- the UI format -------------------------------------------------------------------------


def ui_node(
    node_id: int,
    node_type: str,
    *,
    inputs: list[tuple[str, str]] | None = None,
    widget_inputs: list[tuple[str, str]] | None = None,
    outputs: list[tuple[str, str]] | None = None,
    widgets: list[Any] | None = None,
    mode: int = 0,
    title: str | None = None,
    properties: Json | None = None,
) -> Json:
    """A node as the ComfyUI frontend saves it; `wire` fills in the link ids."""
    node: Json = {
        "id": node_id,
        "type": node_type,
        "pos": [100.0 + 10 * node_id, 200.0],
        "size": [315, 262],
        "flags": {},
        "order": node_id,
        "mode": mode,
        "inputs": [
            {"localized_name": name, "name": name, "type": kind, "link": None}
            for name, kind in inputs or []
        ]
        + [
            {
                "localized_name": name,
                "name": name,
                "type": kind,
                "widget": {"name": name},
                "link": None,
            }
            for name, kind in widget_inputs or []
        ],
        "outputs": [
            {"localized_name": name, "name": name, "type": kind, "links": []}
            for name, kind in outputs or []
        ],
        "properties": {"Node name for S&R": node_type, "cnr_id": "comfy-core", "ver": "0.3.75"},
    }
    if properties:
        node["properties"].update(properties)
    if widgets is not None:
        node["widgets_values"] = widgets
    if title is not None:
        node["title"] = title
    return node


def wire(nodes: list[Json], links: list[LinkRow], *, as_objects: bool = False) -> list[Any]:
    """Write each link into its nodes' slots; return the `links` list in the chosen form."""
    by_id = {n["id"]: n for n in nodes}
    for link_id, origin, origin_slot, target, target_slot, _kind in links:
        if origin in by_id:
            out = by_id[origin]["outputs"][origin_slot]
            out["links"] = [*(out.get("links") or []), link_id]
        if target in by_id:
            by_id[target]["inputs"][target_slot]["link"] = link_id
    if as_objects:
        return [
            {
                "id": link_id,
                "origin_id": origin,
                "origin_slot": origin_slot,
                "target_id": target,
                "target_slot": target_slot,
                "type": kind,
            }
            for link_id, origin, origin_slot, target, target_slot, kind in links
        ]
    return [list(row) for row in links]


def _zimage_nodes(t: ZImageTemplate, *, ksampler_id: int = 3) -> list[Json]:
    return [
        ui_node(
            16,
            "UNETLoader",
            outputs=[("MODEL", "MODEL")],
            widget_inputs=[("unet_name", "COMBO"), ("weight_dtype", "COMBO")],
            widgets=[t.model, "default"],
            title="Load Diffusion Model",
        ),
        ui_node(
            18,
            "CLIPLoader",
            outputs=[("CLIP", "CLIP")],
            widgets=[t.encoder, "lumina2", "default"],
            title="Load CLIP",
        ),
        ui_node(17, "VAELoader", outputs=[("VAE", "VAE")], widgets=[t.vae]),
        ui_node(
            11,
            "ModelSamplingAuraFlow",
            inputs=[("model", "MODEL")],
            outputs=[("MODEL", "MODEL")],
            widgets=[3],
        ),
        ui_node(
            6,
            "CLIPTextEncode",
            inputs=[("clip", "CLIP")],
            widget_inputs=[("text", "STRING")],
            outputs=[("CONDITIONING", "CONDITIONING")],
            widgets=[t.prompt],
            title="CLIP Text Encode (Positive Prompt)",
        ),
        ui_node(
            7,
            "ConditioningZeroOut",
            inputs=[("conditioning", "CONDITIONING")],
            outputs=[("CONDITIONING", "CONDITIONING")],
        ),
        ui_node(
            13,
            "EmptySD3LatentImage",
            widget_inputs=[("width", "INT"), ("height", "INT"), ("batch_size", "INT")],
            outputs=[("LATENT", "LATENT")],
            widgets=[t.width, t.height, 1],
        ),
        ui_node(
            ksampler_id,
            "KSampler",
            inputs=[
                ("model", "MODEL"),
                ("positive", "CONDITIONING"),
                ("negative", "CONDITIONING"),
                ("latent_image", "LATENT"),
            ],
            widget_inputs=[("seed", "INT"), ("steps", "INT"), ("cfg", "FLOAT")],
            outputs=[("LATENT", "LATENT")],
            widgets=[t.seed, "randomize", t.steps, t.cfg, "euler", "simple", 1],
        ),
        ui_node(
            8,
            "VAEDecode",
            inputs=[("samples", "LATENT"), ("vae", "VAE")],
            outputs=[("IMAGE", "IMAGE")],
        ),
    ]


def zimage_ui_nodes(**fields: Unpack[TemplateFields]) -> list[Json]:
    """The template's nodes as the UI saves them, without links or an output node."""
    return _zimage_nodes(ZImageTemplate(**fields))


# The template's links in the UI format (its SaveImage is node 9).
ZIMAGE_LINKS: list[LinkRow] = [
    (20, 16, 0, 11, 0, "MODEL"),
    (21, 18, 0, 6, 0, "CLIP"),
    (22, 17, 0, 8, 1, "VAE"),
    (23, 11, 0, 3, 0, "MODEL"),
    (24, 6, 0, 3, 1, "CONDITIONING"),
    (25, 6, 0, 7, 0, "CONDITIONING"),
    (26, 7, 0, 3, 2, "CONDITIONING"),
    (27, 13, 0, 3, 3, "LATENT"),
    (28, 3, 0, 8, 0, "LATENT"),
    (29, 8, 0, 9, 0, "IMAGE"),
]


def ui_document(nodes: list[Json], links: list[LinkRow]) -> Json:
    """A UI-format workflow of `nodes` wired by `links` (schema 0.4, links as arrays)."""
    return {
        "last_node_id": max(n["id"] for n in nodes),
        "last_link_id": max(row[0] for row in links),
        "nodes": nodes,
        "links": wire(nodes, links),
        "groups": [],
        "config": {},
        "extra": {},
        "version": 0.4,
    }


def zimage_ui(**fields: Unpack[TemplateFields]) -> Json:
    """The same template as the UI saves it (schema 0.4, links as arrays)."""
    nodes = _zimage_nodes(ZImageTemplate(**fields))
    nodes.append(ui_node(9, "SaveImage", inputs=[("images", "IMAGE")], widgets=["z-image"]))
    links = ZIMAGE_LINKS
    return {
        "id": "8d1b0d5e-7a55-4b36-9d0e-3c1c1a1f9e21",
        "revision": 0,
        "last_node_id": 18,
        "last_link_id": 29,
        "nodes": nodes,
        "links": wire(nodes, links),
        "groups": [],
        "config": {},
        "extra": {"ds": {"scale": 1.0, "offset": [0, 0]}, "frontendVersion": "1.30.6"},
        "version": 0.4,
    }


def zimage_ui_subgraph(*, prompt: str = "a lighthouse at dusk", seed: int = 1234) -> Json:
    """The template the way current ComfyUI ships it: the pipeline inside a subgraph.

    Inside: links as objects, a Reroute on the VAE wire, a bypassed LoRA loader between the model
    and the sampler, a muted preview and a note. Outside: the subgraph instance with a promoted
    prompt widget and a promoted seed (`proxyWidgets`), its width wired from a PrimitiveInt node,
    a SaveImage, and two notes.
    """
    inner = _zimage_nodes(ZImageTemplate(prompt="stale inner prompt", seed=999), ksampler_id=5)
    inner[-2]["widgets_values"] = [999, "fixed", 8, 1, "euler", "simple", 1]
    inner += [
        ui_node(40, "Reroute", inputs=[("", "*")], outputs=[("", "VAE")]),
        ui_node(
            41,
            "LoraLoaderModelOnly",
            inputs=[("model", "MODEL")],
            outputs=[("MODEL", "MODEL")],
            widgets=["pixel_art_style.safetensors", 0.8],
            mode=4,
        ),
        ui_node(42, "PreviewImage", inputs=[("images", "IMAGE")], mode=2),
        ui_node(43, "MarkdownNote", widgets=["Turbo: 8 steps, cfg 1."]),
    ]
    inner_links: list[LinkRow] = [
        (1, 16, 0, 11, 0, "MODEL"),
        (2, 11, 0, 41, 0, "MODEL"),
        (3, 41, 0, 5, 0, "MODEL"),
        (4, 18, 0, 6, 0, "CLIP"),
        (34, -10, 0, 6, 1, "STRING"),
        (5, 6, 0, 5, 1, "CONDITIONING"),
        (6, 6, 0, 7, 0, "CONDITIONING"),
        (7, 7, 0, 5, 2, "CONDITIONING"),
        (35, -10, 1, 13, 0, "INT"),
        (8, 13, 0, 5, 3, "LATENT"),
        (10, 5, 0, 8, 0, "LATENT"),
        (11, 17, 0, 40, 0, "VAE"),
        (12, 40, 0, 8, 1, "VAE"),
        (9, 8, 0, -20, 0, "IMAGE"),
        (13, 8, 0, 42, 0, "IMAGE"),
    ]
    subgraph: Json = {
        "id": SUBGRAPH_ID,
        "version": 1,
        "state": {"lastGroupId": 0, "lastNodeId": 43, "lastLinkId": 35, "lastRerouteId": 0},
        "revision": 0,
        "config": {},
        "name": "Text to Image (Z-Image-Turbo)",
        "inputNode": {"id": -10, "bounding": [-300, 300, 120, 80]},
        "outputNode": {"id": -20, "bounding": [1600, 300, 120, 60]},
        "inputs": [
            {
                "id": "0b1c2d3e-0000-4000-8000-000000000001",
                "name": "text",
                "type": "STRING",
                "linkIds": [34],
                "localized_name": "text",
                "label": "prompt",
                "pos": [-200, 320],
            },
            {
                "id": "0b1c2d3e-0000-4000-8000-000000000002",
                "name": "width",
                "type": "INT",
                "linkIds": [35],
                "localized_name": "width",
                "pos": [-200, 340],
            },
        ],
        "outputs": [
            {
                "id": "0b1c2d3e-0000-4000-8000-000000000003",
                "name": "IMAGE",
                "type": "IMAGE",
                "linkIds": [9],
                "localized_name": "IMAGE",
                "pos": [1620, 320],
            }
        ],
        "widgets": [],
        "nodes": inner,
        "groups": [],
        "links": wire(inner, inner_links, as_objects=True),
        "extra": {},
    }
    outer = [
        ui_node(
            57,
            SUBGRAPH_ID,
            outputs=[("IMAGE", "IMAGE")],
            widgets=[prompt, seed],
            title="Text to Image (Z-Image-Turbo)",
            properties={"proxyWidgets": [["-1", "text"], ["5", "seed"]]},
        ),
        ui_node(60, "PrimitiveInt", outputs=[("INT", "INT")], widgets=[768, "fixed"]),
        ui_node(9, "SaveImage", inputs=[("images", "IMAGE")], widgets=["z-image"]),
        ui_node(90, "Note", widgets=["Download the models into models/ first."]),
        ui_node(91, "MarkdownNote", widgets=["## Z-Image Turbo"]),
    ]
    # The instance's slots follow the subgraph's inputs; the prompt is a widget on it.
    outer[0]["inputs"] = [
        {
            "label": "prompt",
            "name": "text",
            "type": "STRING",
            "widget": {"name": "text"},
            "link": None,
        },
        {"name": "width", "type": "INT", "link": None},
    ]
    outer_links: list[LinkRow] = [(61, 60, 0, 57, 1, "INT"), (62, 57, 0, 9, 0, "IMAGE")]
    return {
        "id": "2f4c9a70-1111-4a2b-8c3d-4e5f6a7b8c9d",
        "revision": 0,
        "last_node_id": 91,
        "last_link_id": 62,
        "nodes": outer,
        "links": wire(outer, outer_links),
        "groups": [],
        "definitions": {"subgraphs": [subgraph]},
        "config": {},
        "extra": {"ds": {"scale": 0.8, "offset": [0, 0]}, "frontendVersion": "1.30.6"},
        "version": 0.4,
    }


def sd_txt2img_ui() -> Json:
    """ComfyUI's classic default text-to-image workflow (a Stable Diffusion checkpoint)."""
    nodes = [
        ui_node(
            4,
            "CheckpointLoaderSimple",
            outputs=[("MODEL", "MODEL"), ("CLIP", "CLIP"), ("VAE", "VAE")],
            widgets=["v1-5-pruned-emaonly.safetensors"],
        ),
        ui_node(
            6,
            "CLIPTextEncode",
            inputs=[("clip", "CLIP")],
            outputs=[("CONDITIONING", "CONDITIONING")],
            widgets=["beautiful scenery nature glass bottle landscape, purple galaxy bottle,"],
        ),
        ui_node(
            7,
            "CLIPTextEncode",
            inputs=[("clip", "CLIP")],
            outputs=[("CONDITIONING", "CONDITIONING")],
            widgets=["text, watermark"],
        ),
        ui_node(5, "EmptyLatentImage", outputs=[("LATENT", "LATENT")], widgets=[512, 512, 1]),
        ui_node(
            3,
            "KSampler",
            inputs=[
                ("model", "MODEL"),
                ("positive", "CONDITIONING"),
                ("negative", "CONDITIONING"),
                ("latent_image", "LATENT"),
            ],
            outputs=[("LATENT", "LATENT")],
            widgets=[156680208700286, "randomize", 20, 8, "euler", "normal", 1],
        ),
        ui_node(
            8,
            "VAEDecode",
            inputs=[("samples", "LATENT"), ("vae", "VAE")],
            outputs=[("IMAGE", "IMAGE")],
        ),
        ui_node(9, "SaveImage", inputs=[("images", "IMAGE")], widgets=["ComfyUI"]),
    ]
    links: list[LinkRow] = [
        (1, 4, 0, 3, 0, "MODEL"),
        (3, 4, 1, 6, 0, "CLIP"),
        (5, 4, 1, 7, 0, "CLIP"),
        (4, 6, 0, 3, 1, "CONDITIONING"),
        (6, 7, 0, 3, 2, "CONDITIONING"),
        (2, 5, 0, 3, 3, "LATENT"),
        (7, 3, 0, 8, 0, "LATENT"),
        (8, 4, 2, 8, 1, "VAE"),
        (9, 8, 0, 9, 0, "IMAGE"),
    ]
    return ui_document(nodes, links)


def with_nodes(workflow: Json, **extra: Json) -> Json:
    """An API-format workflow with nodes added or replaced (a deep copy)."""
    out = copy.deepcopy(workflow)
    out.update(copy.deepcopy(extra))
    return out


def with_model_sampling(workflow: Json, class_type: str, **widgets: Any) -> Json:
    """The Z-Image template with its ModelSamplingAuraFlow (node 11) replaced by `class_type`
    (ModelSamplingSD3, ModelSamplingFlux) with `widgets`, on the same model."""
    model = workflow["11"]["inputs"]["model"]
    return {**workflow, "11": {"class_type": class_type, "inputs": {"model": model, **widgets}}}
