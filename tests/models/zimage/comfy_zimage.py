"""ComfyUI workflows naming the kit's files, written from ComfyUI's documented formats.

The API (prompt) format is `{id: {class_type, inputs}}`, a link being `[source id, output slot]`.
The UI format saves `nodes` (positional `widgets_values`, `inputs` with a `link` id, `outputs` with
`links`) and `links` rows `[id, origin id, origin slot, target id, target slot, type]`.
"""

from __future__ import annotations

from typing import Any

from primitive_graphs import ENCODER, MODEL, VAE

Json = dict[str, Any]


def zimage_api(
    prompt: str, *, seed: int, width: int = 64, height: int = 64, steps: int = 8, cfg: float = 1.0
) -> Json:
    """ComfyUI's Z-Image Turbo text-to-image template (API format)."""
    return {
        "3": {
            "class_type": "KSampler",
            "inputs": {
                "seed": seed,
                "steps": steps,
                "cfg": cfg,
                "sampler_name": "euler",
                "scheduler": "simple",
                "denoise": 1.0,
                "model": ["11", 0],
                "positive": ["6", 0],
                "negative": ["7", 0],
                "latent_image": ["13", 0],
            },
        },
        "6": {"class_type": "CLIPTextEncode", "inputs": {"text": prompt, "clip": ["18", 0]}},
        "7": {"class_type": "ConditioningZeroOut", "inputs": {"conditioning": ["6", 0]}},
        "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["17", 0]}},
        "9": {"class_type": "SaveImage", "inputs": {"filename_prefix": "z", "images": ["8", 0]}},
        "11": {"class_type": "ModelSamplingAuraFlow", "inputs": {"shift": 3, "model": ["16", 0]}},
        "13": {
            "class_type": "EmptySD3LatentImage",
            "inputs": {"width": width, "height": height, "batch_size": 1},
        },
        "16": {
            "class_type": "UNETLoader",
            "inputs": {"unet_name": MODEL, "weight_dtype": "default"},
        },
        "17": {"class_type": "VAELoader", "inputs": {"vae_name": VAE}},
        "18": {
            "class_type": "CLIPLoader",
            "inputs": {"clip_name": ENCODER, "type": "lumina2", "device": "default"},
        },
    }


def _node(
    node_id: int,
    node_type: str,
    inputs: list[tuple[str, str]],
    outputs: list[tuple[str, str]],
    widgets: list[Any],
) -> Json:
    return {
        "id": node_id,
        "type": node_type,
        "pos": [40.0 * node_id, 120.0],
        "size": [300, 120],
        "flags": {},
        "order": node_id,
        "mode": 0,
        "inputs": [{"name": n, "type": t, "link": None} for n, t in inputs],
        "outputs": [
            {"name": n, "type": t, "links": [], "slot_index": i} for i, (n, t) in enumerate(outputs)
        ],
        "properties": {"Node name for S&R": node_type},
        "widgets_values": widgets,
    }


def zimage_ui(
    prompt: str, *, seed: int, width: int = 64, height: int = 64, steps: int = 8, cfg: float = 1.0
) -> Json:
    """The same template as ComfyUI's frontend saves it (UI format)."""
    cond = ("CONDITIONING", "CONDITIONING")
    nodes = [
        _node(16, "UNETLoader", [], [("MODEL", "MODEL")], [MODEL, "default"]),
        _node(18, "CLIPLoader", [], [("CLIP", "CLIP")], [ENCODER, "lumina2", "default"]),
        _node(17, "VAELoader", [], [("VAE", "VAE")], [VAE]),
        _node(11, "ModelSamplingAuraFlow", [("model", "MODEL")], [("MODEL", "MODEL")], [3]),
        _node(6, "CLIPTextEncode", [("clip", "CLIP")], [cond], [prompt]),
        _node(7, "ConditioningZeroOut", [("conditioning", "CONDITIONING")], [cond], []),
        _node(13, "EmptySD3LatentImage", [], [("LATENT", "LATENT")], [width, height, 1]),
        _node(
            3,
            "KSampler",
            [
                ("model", "MODEL"),
                ("positive", "CONDITIONING"),
                ("negative", "CONDITIONING"),
                ("latent_image", "LATENT"),
            ],
            [("LATENT", "LATENT")],
            [seed, "fixed", steps, cfg, "euler", "simple", 1.0],
        ),
        _node(8, "VAEDecode", [("samples", "LATENT"), ("vae", "VAE")], [("IMAGE", "IMAGE")], []),
        _node(9, "SaveImage", [("images", "IMAGE")], [], ["z"]),
    ]
    links = [
        [1, 16, 0, 11, 0, "MODEL"],
        [2, 18, 0, 6, 0, "CLIP"],
        [3, 17, 0, 8, 1, "VAE"],
        [4, 11, 0, 3, 0, "MODEL"],
        [5, 6, 0, 3, 1, "CONDITIONING"],
        [6, 6, 0, 7, 0, "CONDITIONING"],
        [7, 7, 0, 3, 2, "CONDITIONING"],
        [8, 13, 0, 3, 3, "LATENT"],
        [9, 3, 0, 8, 0, "LATENT"],
        [10, 8, 0, 9, 0, "IMAGE"],
    ]
    by_id = {n["id"]: n for n in nodes}
    for link_id, origin, origin_slot, target, target_slot, _kind in links:
        by_id[origin]["outputs"][origin_slot]["links"].append(link_id)
        by_id[target]["inputs"][target_slot]["link"] = link_id
    return {
        "last_node_id": 18,
        "last_link_id": 10,
        "nodes": nodes,
        "links": links,
        "groups": [],
        "config": {},
        "extra": {},
        "version": 0.4,
    }


SD_CHECKPOINT = "v1-5-pruned-emaonly.safetensors"


def sd_txt2img_api() -> Json:
    """ComfyUI's default Stable Diffusion text-to-image workflow (API format)."""
    return {
        "3": {
            "class_type": "KSampler",
            "inputs": {
                "seed": 8566257,
                "steps": 20,
                "cfg": 8,
                "sampler_name": "euler",
                "scheduler": "normal",
                "denoise": 1,
                "model": ["4", 0],
                "positive": ["6", 0],
                "negative": ["7", 0],
                "latent_image": ["5", 0],
            },
        },
        "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": SD_CHECKPOINT}},
        "5": {
            "class_type": "EmptyLatentImage",
            "inputs": {"width": 512, "height": 512, "batch_size": 1},
        },
        "6": {
            "class_type": "CLIPTextEncode",
            "inputs": {"text": "a bottle with a galaxy inside", "clip": ["4", 1]},
        },
        "7": {
            "class_type": "CLIPTextEncode",
            "inputs": {"text": "text, watermark", "clip": ["4", 1]},
        },
        "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["4", 2]}},
        "9": {
            "class_type": "SaveImage",
            "inputs": {"filename_prefix": "ComfyUI", "images": ["8", 0]},
        },
    }
