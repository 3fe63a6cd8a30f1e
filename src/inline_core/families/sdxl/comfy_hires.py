"""ComfyUI's hires fix read onto the node's `hires_*` params (`hires.py`).

The classic two-pass chain: a first KSampler on an EmptyLatentImage, a `LatentUpscale` (pixel
width and height, 0 keeping the aspect; `crop`) or `LatentUpscaleBy` (`scale_by` of the latent's
size, rounded) over its latents, and a second KSampler on them (its steps and denoise the pass's)
whose latents are decoded. Both KSamplers must sample one model with one prompt pair, sampler,
scheduler and cfg (the node has one of each); what renders otherwise is listed: a second seed
(the node draws the pass's noise from its one seed). An upscale method that is not an
interpolation mode (`bislerp`), a centre crop that crops, and a hires pass over anything but
an EmptyLatentImage's first pass are refused naming the node.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from inline_core.families.sdxl.hires import HIRES_METHODS, SIZE_STEP, method_refusal
from inline_core.importer.dropped import UnsupportedNode
from inline_core.importer.own_node import Collapse, Sampling
from inline_core.importer.values import describe
from inline_core.importer.workflow import ComfyNode, Link

UPSCALE, UPSCALE_BY = "LatentUpscale", "LatentUpscaleBy"
UPSCALES = (UPSCALE, UPSCALE_BY)
FIRST_LATENT = "EmptyLatentImage"
LATENT_DEFAULT = 512  # EmptyLatentImage's own width and height
MIN_SIDE = 64  # LatentUpscale's least side in pixels


def upscaled_by(node: ComfyNode | None) -> bool:
    return node is not None and node.class_type in UPSCALES


def hires_sampling(
    collapse: Collapse, sampler: ComfyNode, first_pass: Callable[[ComfyNode], Sampling]
) -> Sampling:
    """The two KSamplers around `sampler`'s upscaled latents: the first pass read by
    `first_pass`, the second as the node's hires params."""
    m = collapse.mapper
    upscale = collapse.required(sampler, "latent_image")
    base = collapse.required(upscale, "samples")
    if base.class_type != "KSampler":
        raise _refused(base, f"{describe(base)} makes the upscaled latents, not a KSampler")
    latent = collapse.required(base, "latent_image")
    if latent.class_type != FIRST_LATENT:
        raise _refused(base, f"its latents come from {describe(latent)}, not an {FIRST_LATENT}")
    found = first_pass(base)
    _same_sampling(collapse, base, sampler)
    seed, own = m.whole(sampler, "seed", 0), found.seed
    if seed != own:
        m.substituted(
            sampler,
            f"its seed {seed} draws the hires pass's noise; the node draws it from "
            f"{describe(base)}'s {own}",
        )
    width = m.whole(latent, "width", LATENT_DEFAULT)
    height = m.whole(latent, "height", LATENT_DEFAULT)
    size, method = _upscaled_size(collapse, upscale, width, height)
    hires = {
        "hires_width": size[0],
        "hires_height": size[1],
        "hires_steps": m.whole(sampler, "steps", 20),
        "hires_denoise": m.number(sampler, "denoise", 1.0),
        "hires_method": method,
    }
    return Sampling(found.first, found.last, found.seed, found.steps, found.guidance,
                    {**found.extra, **hires})  # fmt: skip


def _same_sampling(collapse: Collapse, base: ComfyNode, second: ComfyNode) -> None:
    """The second KSampler samples as the first: one model, prompt pair, sampler and cfg."""
    m = collapse.mapper
    for widget, default in (("sampler_name", "euler"), ("scheduler", "normal")):
        mine, theirs = m.text(second, widget, default), m.text(base, widget, default)
        if mine != theirs:
            raise _refused(second, f"its {widget} {mine!r} is not {describe(base)}'s {theirs!r}")
    if m.number(second, "cfg", 8.0) != m.number(base, "cfg", 8.0):
        raise _refused(second, f"its cfg is not {describe(base)}'s (one cfg guides both)")
    if _model_of(collapse, second) != _model_of(collapse, base):
        raise _refused(second, f"it samples another model (or LoRAs) than {describe(base)}")
    for name in ("positive", "negative"):
        wanted = collapse.prompt(base, name)  # first: the base's CLIP layer is the node's
        mine, theirs = collapse.required(second, name), collapse.required(base, name)
        if mine.id == theirs.id:
            continue
        text = collapse.prompt(second, name)
        if text != wanted:
            why = f"its {name} prompt {text[:60]!r} is not {describe(base)}'s {wanted[:60]!r}"
            raise _refused(second, why)
        if mine.inputs.get("clip") != theirs.inputs.get("clip"):
            why = f"its {name} prompt reads another CLIP way than {describe(base)}'s"
            raise _refused(second, why)


def _model_of(collapse: Collapse, sampler: ComfyNode) -> tuple[Any, ...]:
    values, adapters, loader = collapse.model_way(sampler)
    checkpoint = collapse.mapper.text(loader, "ckpt_name")
    return (sorted(values.items()), [a.id for a in adapters], checkpoint)


def _upscaled_size(
    collapse: Collapse, node: ComfyNode, width: int, height: int
) -> tuple[tuple[int, int], str]:
    """The upscale's size in pixels from the first pass's, and its method: ComfyUI's own
    arithmetic (`LatentUpscale` and `LatentUpscaleBy`)."""
    m = collapse.mapper
    method = m.text(node, "upscale_method", HIRES_METHODS[0])
    if method not in HIRES_METHODS:
        raise UnsupportedNode(f"{describe(node)}: {method_refusal(method)}")
    cells = (width // SIZE_STEP, height // SIZE_STEP)
    if node.class_type == UPSCALE_BY:
        scale = m.number(node, "scale_by", 1.5)
        return (round(cells[0] * scale) * SIZE_STEP, round(cells[1] * scale) * SIZE_STEP), method
    w, h = m.whole(node, "width", 512), m.whole(node, "height", 512)
    if not w and not h:  # ComfyUI passes the latents on as they are
        return (cells[0] * SIZE_STEP, cells[1] * SIZE_STEP), "nearest-exact"
    if not w:
        h = max(MIN_SIDE, h)
        w = max(MIN_SIDE, round(cells[0] * h / cells[1]))
    elif not h:
        w = max(MIN_SIDE, w)
        h = max(MIN_SIDE, round(cells[1] * w / cells[0]))
    else:
        w, h = max(MIN_SIDE, w), max(MIN_SIDE, h)
    new = (w // SIZE_STEP, h // SIZE_STEP)
    crop = m.text(node, "crop", "disabled")
    if crop != "disabled" and cells[0] * new[1] != cells[1] * new[0]:
        raise UnsupportedNode(
            f"{describe(node)}: crop {crop!r} crops the latents to a new aspect; the node "
            "scales them whole (crop 'disabled', or the same aspect)"
        )
    return (new[0] * SIZE_STEP, new[1] * SIZE_STEP), method


def _refused(node: ComfyNode, why: str) -> UnsupportedNode:
    return UnsupportedNode(
        f"{describe(node)}: {why}. A hires fix imports onto the node's hires params as "
        "ComfyUI's two-pass chain has it: a KSampler on an EmptyLatentImage, a LatentUpscale or "
        "LatentUpscaleBy, and a second KSampler on the same model, prompts, sampler, scheduler "
        "and cfg"
    )


def linked_node(collapse: Collapse, node: ComfyNode, name: str) -> ComfyNode | None:
    """The node on `node`'s input `name`, unread (None: none)."""
    raw = node.inputs.get(name)
    return collapse.nodes.get(raw.node) if isinstance(raw, Link) else None
