"""SkyReels-V2's transformer format: Wan's architecture with diffusion forcing (a timestep per
latent frame) and, in some models, an fps embedding; diffusers' `SkyReelsV2Transformer3DModel`
(torch-free at import). Its keys are Wan's (diffusers reads both with its Wan converter), so its
shapes give the same config, plus `inject_sample_info` where the fps embedding is there.
"""

from __future__ import annotations

from typing import Any

from inline_core.diffusion.files.configs import ConfigReader
from inline_core.diffusion.files.shapes import Shapes, strip_prefix
from inline_core.diffusion.formats.format import ModelFormat
from inline_core.families.wan import transformer as wan

CLASS_NAME = "SkyReelsV2Transformer3DModel"
FPS_KEY = "fps_embedding.weight"


def is_skyreels_transformer(shapes: Shapes) -> bool:
    """A Wan-shaped transformer with SkyReels-V2's fps embedding (a single file without one
    cannot be told from Wan's by its shapes: its name decides, `files.py`)."""
    _prefix, s = strip_prefix(shapes, wan.PREFIXES)
    return wan.is_wan_transformer(shapes) and FPS_KEY in s


def infer_config(shapes: Shapes) -> dict[str, Any]:
    _prefix, s = strip_prefix(shapes, wan.PREFIXES)
    config = wan.infer_config(shapes)
    return {**config, "inject_sample_info": FPS_KEY in s, "num_frame_per_block": 1}


config_of = ConfigReader(infer_config)

FORMAT = ModelFormat(
    what="diffusion model",
    title="SkyReels-V2 diffusion model",
    library="diffusers",
    class_name=CLASS_NAME,
    recognize=wan.is_wan_transformer,
    infer_config=infer_config,
    convert=wan.from_original,
    computed_at_load=("condition_embedder.time_embedder",),
)
