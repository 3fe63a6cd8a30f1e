"""The hires fix: a second pass at a larger size over the first pass's latents (torch-free).

ComfyUI's classic two-pass workflow samples the picture, scales its latents up with
`LatentUpscale` / `LatentUpscaleBy` (`torch.nn.functional.interpolate` in one of its modes), then
samples again with a second KSampler at a denoise below 1. On the node that is `hires_width` x
`hires_height` (0 x 0: no second pass), `hires_steps`, `hires_denoise` (ComfyUI's: the last
`hires_steps` of a `hires_steps / hires_denoise` schedule) and `hires_method`. The second pass
samples with the node's model, prompts, sampler, schedule and guidance; its noise is drawn from
the node's seed at the new size, as a KSampler on that seed draws it. ComfyUI's `bislerp` is its
own slerp, not an interpolate mode: it is not offered.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from inline_core.graph.descriptor import ParamSpec, ParamWidget

# ComfyUI's latent upscale methods that are `torch.nn.functional.interpolate`'s own modes.
HIRES_METHODS = ("nearest-exact", "bilinear", "area", "bicubic")
NOT_OFFERED = ("bislerp",)  # ComfyUI's own spherical blend: run here it would be another picture
SIZE_STEP = 8  # pixels per latent cell


@dataclass(frozen=True)
class HiresPass:
    width: int  # the second pass's size in pixels (multiples of 8)
    height: int
    steps: int
    denoise: float  # ComfyUI's
    method: str  # one of HIRES_METHODS


def _size(name: str, side: str) -> ParamSpec:
    return ParamSpec(
        name,
        ParamWidget.NUMBER,
        default=0,
        minimum=0,
        maximum=8192,
        step=SIZE_STEP,
        integer=True,
        label=f"Hires {side} (LatentUpscale's; 0: no second pass)",
    )


HIRES_PARAMS = (
    _size("hires_width", "width"),
    _size("hires_height", "height"),
    ParamSpec(
        "hires_steps",
        ParamWidget.NUMBER,
        default=20,
        minimum=1,
        maximum=200,
        integer=True,
        label="Hires steps (the second KSampler's)",
    ),
    ParamSpec(
        "hires_denoise",
        ParamWidget.NUMBER,
        default=0.5,
        minimum=0.01,
        maximum=1.0,
        step=0.01,
        label="Hires denoise (the second KSampler's)",
    ),
    ParamSpec(
        "hires_method",
        ParamWidget.SELECT,
        default=HIRES_METHODS[0],
        options=HIRES_METHODS,
        label="Hires latent upscale method",
    ),
)


def hires_pass(params: Mapping[str, Any]) -> HiresPass | None:
    """The node's hires params as a pass (None: no second pass)."""
    width, height = int(params.get("hires_width") or 0), int(params.get("hires_height") or 0)
    if not width and not height:
        return None
    return HiresPass(
        width,
        height,
        int(params["hires_steps"]),
        float(params["hires_denoise"]),
        str(params["hires_method"]),
    )


def hires_refusal(hires: HiresPass) -> str | None:
    """Why a pass cannot run (None: it can)."""
    if not hires.width or not hires.height:
        return (
            f"hires_width {hires.width} and hires_height {hires.height}: set both for a second "
            "pass, or both to 0 for none"
        )
    if hires.width % SIZE_STEP or hires.height % SIZE_STEP:
        return f"hires_width and hires_height must be multiples of {SIZE_STEP}"
    if hires.method not in HIRES_METHODS:
        return method_refusal(hires.method)
    if hires.steps < 1 or not 0.0 < hires.denoise <= 1.0:
        return "the hires pass needs at least one step and a denoise above 0, at most 1"
    return None


def method_refusal(method: str) -> str:
    why = (
        " (ComfyUI's own spherical blend, not an interpolation mode)"
        if method in NOT_OFFERED
        else ""
    )
    return (
        f"latent upscale method {method!r}{why} is not offered; choose one of "
        f"{', '.join(HIRES_METHODS)}"
    )
