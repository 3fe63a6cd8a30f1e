"""ComfyUI's masks and inpaint nodes import onto the mask nodes and the inpaint primitives, with
ComfyUI's semantics kept (the alpha inverted, LoadImageMask's channel, the grow), in both formats;
what cannot be carried over is refused naming the node and what to use instead."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from comfy_harness import Checker, FolderMedia, imported
from PIL import Image

from inline_core.errors import InlineError
from inline_core.importer import ImportResult
from inline_core.models.catalog import Catalog
from tests.importer import comfy_inpaint
from tests.importer.comfy_inpaint import MASK, PHOTO

ASSETS = {PHOTO: "sha256-photo", MASK: "sha256-mask"}
CONTROL_21 = "Z-Image-Turbo-Fun-Controlnet-Union-2.1.safetensors"


@pytest.fixture(autouse=True)
def uploaded(media: FolderMedia) -> None:
    """The assets the workflows' images map onto, where the graph checker finds them."""
    for asset in ASSETS.values():
        Image.new("RGBA", (64, 64)).save(media.root / asset, format="PNG")


def nodes_of(result: ImportResult) -> dict[str, dict[str, Any]]:
    return {n["id"]: n for n in result.to_json()["graph"]["nodes"]}


def source_of(nodes: dict[str, dict[str, Any]], node_id: str, port: str) -> dict[str, Any]:
    return nodes[nodes[node_id]["inputs"][port]["from"]]


def photo_mask(asset: str = ASSETS[PHOTO]) -> dict[str, Any]:
    """LoadImage's MASK: its photo's alpha, inverted."""
    return {"asset": {"ref": "asset", "id": asset}, "channel": "alpha", "invert": True}


def test_vae_encode_for_inpaint_takes_load_images_mask(catalog: Catalog, checker: Checker) -> None:
    result = imported(comfy_inpaint.encode_for_inpaint(grow=9), catalog, assets=ASSETS)
    assert result.skipped == [] and result.changes == [], result.to_json()
    nodes = nodes_of(result)
    encode = source_of(nodes, "c3", "latent")
    assert encode["type"] == "vae/encode-inpaint" and encode["params"] == {"grow": 9}
    assert source_of(nodes, encode["id"], "image")["type"] == "input/image"
    mask = source_of(nodes, encode["id"], "mask")
    assert mask["type"] == "input/mask" and mask["params"] == photo_mask()
    assert source_of(nodes, encode["id"], "vae")["type"] == "load/vae"
    checker.validate(result)


def test_a_noise_mask_from_load_image_mask_through_the_mask_ops(
    catalog: Catalog, checker: Checker
) -> None:
    result = imported(comfy_inpaint.noise_mask(ops=True), catalog, assets=ASSETS)
    assert result.skipped == [] and result.changes == [], result.to_json()
    nodes = nodes_of(result)
    masked = source_of(nodes, "c3", "latent")
    assert masked["type"] == "latent/noise-mask"
    assert masked["params"] == {}  # SetLatentNoiseMask's: stretched over the latent
    assert source_of(nodes, masked["id"], "latent")["type"] == "vae/encode"
    chain: list[tuple[str, dict[str, Any]]] = []
    node = source_of(nodes, masked["id"], "mask")
    while node["type"] != "input/mask":
        chain.append((node["type"], node["params"]))
        node = source_of(nodes, node["id"], "mask")
    assert chain == [
        ("mask/invert", {}),
        ("mask/threshold", {"value": 0.5}),
        ("mask/invert", {}),
        ("mask/grow", {"expand": 2, "tapered_corners": False}),
    ]
    # LoadImageMask's red channel, not inverted (only its alpha is).
    assert node["params"] == {
        "asset": {"ref": "asset", "id": ASSETS[MASK]},
        "channel": "red",
        "invert": False,
    }
    checker.validate(result)


def test_the_ui_format_reads_load_image_masks_widgets(catalog: Catalog, checker: Checker) -> None:
    ui = imported(comfy_inpaint.noise_mask_ui(), catalog, assets=ASSETS)
    api = imported(comfy_inpaint.noise_mask(ops=False), catalog, assets=ASSETS)
    assert ui.to_json()["graph"] == api.to_json()["graph"]
    assert ui.skipped == [] and ui.warnings == api.warnings
    checker.validate(ui)


def test_inpaint_model_conditioning_masks_the_latent_and_passes_its_prompts(
    catalog: Catalog, checker: Checker
) -> None:
    result = imported(comfy_inpaint.model_conditioning(), catalog, assets=ASSETS)
    assert result.skipped == [] and result.changes == [], result.to_json()
    nodes = nodes_of(result)
    assert source_of(nodes, "c3", "positive")["id"] == "c6"  # the prompt itself
    assert "negative" not in nodes["c3"]["inputs"]  # cfg 1: the zeroed negative is left off
    assert any("passes through unchanged" in w for w in result.warnings), result.warnings
    masked = source_of(nodes, "c3", "latent")
    assert masked["type"] == "latent/noise-mask"
    assert masked["params"] == {"crop": True}  # cropped with the pixels, as ComfyUI crops it
    assert source_of(nodes, masked["id"], "latent")["type"] == "vae/encode"
    assert source_of(nodes, masked["id"], "mask")["params"] == photo_mask()
    checker.validate(result)

    plain = imported(comfy_inpaint.model_conditioning(noise_mask=False), catalog, assets=ASSETS)
    assert source_of(nodes_of(plain), "c3", "latent")["type"] == "vae/encode"
    assert not any(n.type.startswith(("input/mask", "latent/noise")) for n in plain.graph.nodes)


def test_control_patches_take_their_mask_and_image_to_inpaint(
    catalog: Catalog, models_root: Path, checker: Checker
) -> None:
    (models_root / "controlnet").mkdir()
    (models_root / "controlnet" / CONTROL_21).write_bytes(b"placeholder weights")
    catalog.rescan()
    qwen = imported(comfy_inpaint.control_inpaint(CONTROL_21), catalog, assets=ASSETS)
    [patch] = [n for n in qwen.to_json()["graph"]["nodes"] if n["type"] == "load/controlnet"]
    assert patch["params"] == {"name": CONTROL_21, "strength": 0.8}
    assert set(patch["inputs"]) == {"model", "vae", "image", "mask"}
    assert source_of(nodes_of(qwen), patch["id"], "mask")["params"] == photo_mask()
    checker.validate(qwen)

    fun = imported(comfy_inpaint.control_inpaint(CONTROL_21, fun=True), catalog, assets=ASSETS)
    [patch] = [n for n in fun.to_json()["graph"]["nodes"] if n["type"] == "load/controlnet"]
    assert set(patch["inputs"]) == {"model", "vae", "inpaint_image", "mask"}
    assert source_of(nodes_of(fun), patch["id"], "inpaint_image")["type"] == "input/image"
    checker.validate(fun)


def test_what_cannot_be_carried_over_is_refused_naming_why(catalog: Catalog) -> None:
    workflow = comfy_inpaint.noise_mask(ops=False)
    workflow["33"] = {
        "class_type": "ImageToMask",
        "inputs": {"image": ["30", 0], "channel": "alpha"},
    }
    with pytest.raises(InlineError) as caught:
        imported(workflow, catalog, assets=ASSETS)
    assert caught.value.code == "unsupported_node"
    assert "ImageToMask 33" in caught.value.message and "LoadImage's MASK" in caught.value.message

    # A control patch with nothing to look at (no control image, no image to inpaint).
    fun = comfy_inpaint.control_inpaint(CONTROL_21, fun=True)
    del fun["42"]["inputs"]["inpaint_image"]
    with pytest.raises(InlineError) as caught:
        imported(fun, catalog, assets=ASSETS)
    assert caught.value.code == "unsupported_node" and "ZImageFunControlnet 42" in str(
        caught.value.message
    )

    # A mask op Inline Core has no equivalent of passes its mask through, said plainly.
    feathered = comfy_inpaint.noise_mask(ops=False)
    feathered["50"] = {
        "class_type": "FeatherMask",
        "inputs": {"mask": ["33", 0], "left": 8, "top": 8, "right": 8, "bottom": 8},
    }
    feathered["38"]["inputs"]["mask"] = ["50", 0]
    result = imported(feathered, catalog, assets=ASSETS)
    assert [c.class_type for c in result.changes] == ["FeatherMask"]
    masked = source_of(nodes_of(result), "c3", "latent")
    assert source_of(nodes_of(result), masked["id"], "mask")["id"] == "c33"


def test_a_composite_back_onto_the_photo_is_listed_as_a_change(catalog: Catalog) -> None:
    workflow = comfy_inpaint.encode_for_inpaint()
    workflow["50"] = {
        "class_type": "ImageCompositeMasked",
        "inputs": {
            "destination": ["30", 0],
            "source": ["8", 0],
            "mask": ["30", 1],
            "x": 0,
            "y": 0,
            "resize_source": False,
        },
    }
    workflow["9"]["inputs"]["images"] = ["50", 0]
    result = imported(workflow, catalog, assets=ASSETS)
    assert result.target == "c8"  # the render, not the photo it would be pasted onto
    [change] = result.changes
    assert change.class_type == "ImageCompositeMasked" and "not pasted back" in change.reason
