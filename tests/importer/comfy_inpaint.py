"""ComfyUI inpaint workflows on the Z-Image template, as ComfyUI users build them (its own inpaint
examples' chains): the photo and its mask from LoadImage (the mask is the photo's alpha) or from
a LoadImageMask, into VAEEncodeForInpaint, SetLatentNoiseMask or InpaintModelConditioning, or a
control patch's mask. API format, and one in the UI format."""

from __future__ import annotations

from typing import Any

from tests.importer.comfy_workflows import (
    ZIMAGE_LINKS,
    LinkRow,
    ui_document,
    ui_node,
    with_nodes,
    zimage_api,
    zimage_ui_nodes,
)

Json = dict[str, Any]
PHOTO = "photo.png"  # RGBA: its alpha is LoadImage's MASK (transparent repaints)
MASK = "mask.png"  # a grayscale mask: white repaints


def _from_image(workflow: Json, latent: list[Any]) -> Json:
    """`workflow` sampling from `latent` instead of its empty latent (left out)."""
    del workflow["13"]
    workflow["3"]["inputs"]["latent_image"] = latent
    return workflow


def load_image(name: str = PHOTO) -> Json:
    return {"class_type": "LoadImage", "inputs": {"image": name, "upload": "image"}}


def encode_for_inpaint(grow: int = 6, **template: Any) -> Json:
    """The photo and its alpha into VAEEncodeForInpaint, sampled from there."""
    workflow = with_nodes(
        zimage_api(**template),
        **{
            "30": load_image(),
            "31": {
                "class_type": "VAEEncodeForInpaint",
                "inputs": {
                    "pixels": ["30", 0],
                    "vae": ["17", 0],
                    "mask": ["30", 1],
                    "grow_mask_by": grow,
                },
            },
        },
    )
    return _from_image(workflow, ["31", 0])


def noise_mask(*, ops: bool = True, **template: Any) -> Json:
    """The photo encoded, a LoadImageMask's red channel (grown, inverted and thresholded when
    `ops`) as its noise mask."""
    nodes: Json = {
        "30": load_image(),
        "32": {"class_type": "VAEEncode", "inputs": {"pixels": ["30", 0], "vae": ["17", 0]}},
        "33": {
            "class_type": "LoadImageMask",
            "inputs": {"image": MASK, "channel": "red", "upload": "image"},
        },
    }
    mask: list[Any] = ["33", 0]
    if ops:
        nodes |= {
            "34": {
                "class_type": "GrowMask",
                "inputs": {"mask": ["33", 0], "expand": 2, "tapered_corners": False},
            },
            "35": {"class_type": "InvertMask", "inputs": {"mask": ["34", 0]}},
            "36": {"class_type": "ThresholdMask", "inputs": {"mask": ["35", 0], "value": 0.5}},
            "37": {"class_type": "InvertMask", "inputs": {"mask": ["36", 0]}},
        }
        mask = ["37", 0]
    nodes["38"] = {
        "class_type": "SetLatentNoiseMask",
        "inputs": {"samples": ["32", 0], "mask": mask},
    }
    return _from_image(with_nodes(zimage_api(**template), **nodes), ["38", 0])


def model_conditioning(*, noise_mask: bool = True, **template: Any) -> Json:
    """InpaintModelConditioning between the prompts and the sampler, the photo's alpha its mask."""
    workflow = with_nodes(
        zimage_api(**template),
        **{
            "30": load_image(),
            "39": {
                "class_type": "InpaintModelConditioning",
                "inputs": {
                    "positive": ["6", 0],
                    "negative": ["7", 0],
                    "vae": ["17", 0],
                    "pixels": ["30", 0],
                    "mask": ["30", 1],
                    "noise_mask": noise_mask,
                },
            },
        },
    )
    workflow["3"]["inputs"].update(positive=["39", 0], negative=["39", 1])
    return _from_image(workflow, ["39", 2])


def control_inpaint(control: str, *, fun: bool = False, **template: Any) -> Json:
    """A control patch with a mask (a 2.x model inpaints through it): QwenImageDiffsynthControlnet
    on the photo (its mask the photo's alpha), or ZImageFunControlnet with the photo as the image
    to inpaint and no control image (`fun`)."""
    patch: Json = {
        "model": ["11", 0],
        "model_patch": ["40", 0],
        "vae": ["17", 0],
        "mask": ["30", 1],
        "strength": 0.8,
    }
    if fun:
        patch["inpaint_image"] = ["30", 0]
    else:
        patch["image"] = ["30", 0]
    workflow = with_nodes(
        zimage_api(**template),
        **{
            "30": load_image(),
            "40": {"class_type": "ModelPatchLoader", "inputs": {"name": control}},
            "42": {
                "class_type": "ZImageFunControlnet" if fun else "QwenImageDiffsynthControlnet",
                "inputs": patch,
            },
        },
    )
    workflow["3"]["inputs"]["model"] = ["42", 0]
    return workflow


def noise_mask_ui(**template: Any) -> Json:
    """`noise_mask(ops=False)` as the UI saves it: LoadImageMask's widgets are its file, its
    channel and the upload button's value."""
    nodes = [n for n in zimage_ui_nodes(**template) if n["type"] != "EmptySD3LatentImage"]
    nodes += [
        ui_node(
            30,
            "LoadImage",
            outputs=[("IMAGE", "IMAGE"), ("MASK", "MASK")],
            widgets=[PHOTO, "image"],
        ),
        ui_node(
            32,
            "VAEEncode",
            inputs=[("pixels", "IMAGE"), ("vae", "VAE")],
            outputs=[("LATENT", "LATENT")],
        ),
        ui_node(33, "LoadImageMask", outputs=[("MASK", "MASK")], widgets=[MASK, "red", "image"]),
        ui_node(
            38,
            "SetLatentNoiseMask",
            inputs=[("samples", "LATENT"), ("mask", "MASK")],
            outputs=[("LATENT", "LATENT")],
        ),
        ui_node(9, "SaveImage", inputs=[("images", "IMAGE")], widgets=["z-image"]),
    ]
    links: list[LinkRow] = [row for row in ZIMAGE_LINKS if row[1] != 13]  # no empty latent
    links += [
        (27, 38, 0, 3, 3, "LATENT"),
        (30, 30, 0, 32, 0, "IMAGE"),
        (31, 17, 0, 32, 1, "VAE"),
        (32, 32, 0, 38, 0, "LATENT"),
        (33, 33, 0, 38, 1, "MASK"),
    ]
    return ui_document(nodes, links)
