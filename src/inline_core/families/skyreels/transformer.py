"""SkyReels-V2's transformer format: Wan's architecture with diffusion forcing (a timestep per
latent frame) and, in some models, an fps embedding; diffusers' `SkyReelsV2Transformer3DModel`
(torch-free at import). Its keys are Wan's (diffusers reads both with its Wan converter), so its
shapes give the same config, plus `inject_sample_info` where the fps embedding is there. The fps
projection is the one part Wan's converter does not know: the original's
`Sequential(Linear, SiLU, Linear)` (`fps_projection.0.`, `.2.`) is diffusers' `FeedForward`
(`fps_projection.net.0.proj.`, `.net.2.`), renamed here both ways.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inline_core.diffusion.files.configs import ConfigReader
from inline_core.diffusion.files.shapes import Shapes, strip_prefix
from inline_core.diffusion.formats.format import ModelFormat
from inline_core.families.wan import transformer as wan

CLASS_NAME = "SkyReelsV2Transformer3DModel"
FPS_KEY = "fps_embedding.weight"
# (the original's, diffusers') names of the fps projection's layers.
FPS_PROJECTION = (
    ("fps_projection.0.", "fps_projection.net.0.proj."),
    ("fps_projection.2.", "fps_projection.net.2."),
)


def is_skyreels_transformer(shapes: Shapes) -> bool:
    """A Wan-shaped transformer with SkyReels-V2's fps embedding (a single file without one
    cannot be told from Wan's by its shapes: its name decides, `files.py`)."""
    _prefix, s = strip_prefix(shapes, wan.PREFIXES)
    return wan.is_wan_transformer(shapes) and FPS_KEY in s


def infer_config(shapes: Shapes) -> dict[str, Any]:
    _prefix, s = strip_prefix(shapes, wan.PREFIXES)
    config = wan.infer_config(shapes)
    return {**config, "inject_sample_info": FPS_KEY in s, "num_frame_per_block": 1}


def to_original(sd: Mapping[str, Any]) -> dict[str, Any]:
    """Diffusers keys -> the original's (what SkyReels' and ComfyUI's files hold)."""
    out: dict[str, Any] = {}
    for key, value in wan.to_original(sd).items():
        for original, ours in FPS_PROJECTION:
            key = key.replace(ours, original) if key.startswith(ours) else key
        out[key] = value
    return out


def from_original(sd: dict[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """Original (optionally prefixed) or diffusers keys -> diffusers: Wan's converter, with the
    fps embedding and projection taken out before it and put back renamed."""
    fps: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    for key, value in sd.items():
        at = key.find("fps_")
        name = key[at:] if at >= 0 else ""
        if not name.startswith(("fps_embedding.", "fps_projection.")):
            rest[key] = value
            continue
        for original, ours in FPS_PROJECTION:
            name = name.replace(original, ours) if name.startswith(original) else name
        fps[name] = value
    return {**wan.from_original(rest, config), **fps}


config_of = ConfigReader(infer_config)

FORMAT = ModelFormat(
    what="diffusion model",
    title="SkyReels-V2 diffusion model",
    library="diffusers",
    class_name=CLASS_NAME,
    recognize=wan.is_wan_transformer,
    infer_config=infer_config,
    convert=from_original,
    computed_at_load=("condition_embedder.time_embedder",),
)
