"""ComfyUI's SDXL inpaint chains import onto `stability/sdxl`'s image and mask inputs:
VAEEncodeForInpaint (or SetLatentNoiseMask over a VAEEncode) on a LoadImage and its alpha
become the node's image and mask, the KSampler's denoise its strength, and the imported graph
renders the graph written by hand. Where the node renders otherwise than ComfyUI (diffusers' mask
reading, the node's size) is listed under `changesPicture`."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image
from test_sdxl_img2img import source_image
from test_sdxl_import import BASE, by_hand, default_graph, rendered

from inline_core.families.sdxl.kit import SDXLKit
from tests.families.import_harness import import_comfy, target_of, upload_png

SIZE = {"width": 64, "height": 64}


def upload_rgba(client: TestClient) -> str:
    """A 64x64 image whose alpha is transparent (repaint) over a block off the latent grid."""
    rgba = source_image(64, 64).convert("RGBA")
    alpha = np.full((64, 64), 255, dtype=np.uint8)
    alpha[13:50, 21:40] = 0
    rgba.putalpha(Image.fromarray(alpha, "L"))
    return upload_png(client, rgba)


def inpaint_graph(kind: str, denoise: float) -> dict[str, Any]:
    graph = default_graph(BASE)
    del graph["5"]
    graph["10"] = {"class_type": "LoadImage", "inputs": {"image": "room.png"}}
    if kind == "encode-for-inpaint":
        graph["11"] = {"class_type": "VAEEncodeForInpaint",
                       "inputs": {"pixels": ["10", 0], "vae": ["4", 2], "mask": ["10", 1],
                                  "grow_mask_by": 6}}  # fmt: skip
    else:
        graph["12"] = {"class_type": "VAEEncode", "inputs": {"pixels": ["10", 0],
                                                             "vae": ["4", 2]}}  # fmt: skip
        graph["11"] = {"class_type": "SetLatentNoiseMask",
                       "inputs": {"samples": ["12", 0], "mask": ["10", 1]}}  # fmt: skip
    graph["3"]["inputs"] |= {"latent_image": ["11", 0], "denoise": denoise}
    return graph


@pytest.mark.parametrize(
    ("kind", "denoise"),
    [("encode-for-inpaint", 1.0), ("noise-mask", 0.8)],
)
def test_an_inpaint_chain_imports_onto_the_image_and_mask_and_renders_the_graph_by_hand(
    client: TestClient, sdxl_kit: SDXLKit, kind: str, denoise: float
) -> None:
    asset = upload_rgba(client)
    response = import_comfy(
        client,
        inpaint_graph(kind, denoise),
        {BASE: sdxl_kit.checkpoint_name},
        assets={"room.png": asset},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    target, nodes = target_of(body)
    assert target["params"]["strength"] == denoise
    image = nodes[target["inputs"]["image"]["from"]]
    mask = nodes[target["inputs"]["mask"]["from"]]
    assert image["type"] == "input/image" and image["params"]["asset"]["id"] == asset
    assert mask["type"] == "input/mask"
    assert mask["params"] == {"asset": {"ref": "asset", "id": asset}, "channel": "alpha",
                              "invert": True}  # fmt: skip
    changes = {c["classType"]: c["reason"] for c in body["changesPicture"]}
    encoder = "VAEEncodeForInpaint" if kind == "encode-for-inpaint" else "SetLatentNoiseMask"
    assert "StableDiffusionXLInpaintPipeline" in changes[encoder]
    assert "the image's size" in changes[encoder]
    assert ("KSampler" in changes) == (denoise < 1.0)
    target["params"] |= SIZE  # the image's size, as the change says
    imported, _take = rendered(client, body["graph"], body["target"])

    hand = by_hand(sdxl_kit, strength=denoise, **SIZE)
    hand["nodes"][:0] = [
        {"id": "i", "type": "input/image", "params": {"asset": {"ref": "asset", "id": asset}}},
        {"id": "m", "type": "input/mask",
         "params": {"asset": {"ref": "asset", "id": asset}, "channel": "alpha",
                    "invert": True}},
    ]  # fmt: skip
    hand["nodes"][-1]["inputs"] |= {"image": {"from": "i", "output": "image"},
                                    "mask": {"from": "m", "output": "mask"}}  # fmt: skip
    by_hand_pixels, _ = rendered(client, hand, "w")
    assert np.array_equal(imported, by_hand_pixels)
    # The kept part is the image's: far from the repainted block, the picture is the source's.
    source = np.asarray(source_image(64, 64)).astype(np.int16)
    kept = np.abs(imported[:, 48:] - source[:, 48:]).mean()
    repainted = np.abs(imported[13:50, 21:40] - source[13:50, 21:40]).mean()
    assert kept < repainted
