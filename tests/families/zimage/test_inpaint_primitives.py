"""The inpaint primitives on the tiny kit: a noise mask keeps the latents it masks out and repaints
the rest, at every step as ComfyUI's samplers do (a white mask is no mask, bit for bit);
`vae/encode-inpaint` encodes the masked pixels as mid-gray and grows the mask as
VAEEncodeForInpaint does."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
import torch
from control_harness import source
from PIL import Image, ImageDraw
from primitive_graphs import Json, Rig, edge, make_rig, primitive_graph

from inline_core.contract.handles import LatentHandle
from inline_core.families.zimage.kit import KitPaths
from inline_core.sampling.loop import StepLoopSampler


@pytest.fixture
def rig(kit: KitPaths, sampler: StepLoopSampler, tmp_path: Path) -> Rig:
    return make_rig(kit.root, sampler, tmp_path)


def square(left: int, right: int, side: int = 64) -> Image.Image:
    """A mask, white (repaint) from `left` to `right` (inclusive) on both axes."""
    out = Image.new("L", (side, side), 0)
    ImageDraw.Draw(out).rectangle((left, left, right, right), fill=255)
    return out


def store(rig: Rig, image: Image.Image) -> Json:
    """An asset named by its content, as uploads are (the node cache trusts the name)."""
    name = hashlib.sha256(image.tobytes()).hexdigest()[:16] + ".png"
    image.save(rig.media.root / name, format="PNG")
    return {"ref": "asset", "id": name}


def graph(rig: Rig, photo: Image.Image, mask: Image.Image | None, *, inpaint: bool) -> Json:
    """The photo encoded (by `vae/encode-inpaint` with `mask`, or `vae/encode` with `mask` as a
    noise mask), then sampled: target `sample`, or `encode` for the latents."""
    out = primitive_graph("a fox", steps=4, seed=11)
    nodes = cast(list[Json], out["nodes"])
    nodes.append({"id": "photo", "type": "input/image", "params": {"asset": store(rig, photo)}})
    encode: Json = {"vae": edge("vae", "vae"), "image": edge("photo", "image")}
    latent = "encode"
    if mask is not None:
        params = {"asset": store(rig, mask), "channel": "red", "invert": False}
        nodes.append({"id": "mask", "type": "input/mask", "params": params})
        if inpaint:
            encode["mask"] = edge("mask", "mask")
        else:
            inputs = {"latent": edge("encode", "latent"), "mask": edge("mask", "mask")}
            nodes.append({"id": "masked", "type": "latent/noise-mask", "inputs": inputs})
            latent = "masked"
    kind = "vae/encode-inpaint" if inpaint else "vae/encode"
    nodes.append(
        {"id": "encode", "type": kind, "params": {"grow": 6} if inpaint else {}, "inputs": encode}
    )
    sample = next(n for n in nodes if n["id"] == "sample")
    sample["inputs"]["latent"] = edge(latent, "latent")
    return out


def latents(rig: Rig, body: Json, target: str) -> tuple[torch.Tensor, LatentHandle]:
    result, _events = rig.run(body, target)
    handle = result.outputs["latent"]
    assert isinstance(handle, LatentHandle) and handle.samples is not None
    return cast(torch.Tensor, handle.samples[0].value).float(), handle


def test_a_noise_mask_keeps_what_it_masks_out_and_repaints_the_rest(rig: Rig) -> None:
    photo = source()
    start, _ = latents(rig, graph(rig, photo, None, inpaint=False), "encode")
    plain, _ = latents(rig, graph(rig, photo, None, inpaint=False), "sample")
    # Pixels 16..47 repaint: latent cells 2..5 (its bilinear resize is exactly 0 or 1 there).
    masked, handle = latents(rig, graph(rig, photo, square(16, 47), inpaint=False), "sample")
    assert handle.info["noise_mask"] is True and handle.noise_mask is not None
    inside = torch.zeros_like(masked, dtype=torch.bool)
    inside[..., 2:6, 2:6] = True
    assert torch.allclose(masked[~inside], start[~inside], atol=1e-4)
    assert (masked[inside] - start[inside]).abs().mean() > 0.1
    # Not the unmasked render's repaint either: the model saw the kept part at every step.
    assert (masked[inside] - plain[inside]).abs().max() > 1e-3
    # A white mask repaints everything: the unmasked render, bit for bit.
    everything, _ = latents(rig, graph(rig, photo, square(0, 63), inpaint=False), "sample")
    assert torch.equal(everything, plain)


def test_encode_for_inpaint_grays_the_masked_pixels_and_grows_the_mask(rig: Rig) -> None:
    photo = source()
    other = photo.copy()
    other.paste((255, 0, 0), (24, 24, 32, 32))  # differs only where the mask repaints
    mask = square(24, 31)
    encoded, handle = latents(rig, graph(rig, photo, mask, inpaint=True), "encode")
    again, _ = latents(rig, graph(rig, other, mask, inpaint=True), "encode")
    assert torch.equal(encoded, again)
    plain, _ = latents(rig, graph(rig, photo, None, inpaint=False), "encode")
    assert not torch.equal(encoded, plain)
    # Grown by a 6x6 box: 2 pixels up and left, 3 down and right (ComfyUI's padding).
    grown = np.asarray(cast(Image.Image, handle.noise_mask))
    expected = np.zeros((64, 64), dtype=np.uint8)
    expected[22:35, 22:35] = 255
    assert (grown == expected).all()
    sampled: Any = rig.run(graph(rig, photo, mask, inpaint=True))[0].takes[0]
    assert sampled.params["noise_mask"] is True
