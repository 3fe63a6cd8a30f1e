"""A tiny random-weight LTX-2.3 stack, offline: the tiny LTX-2 stack (`kit.py`) with 2.3's
timestep-modulated cross-attention (diffusers' `cross_attn_mod` and `audio_cross_attn_mod`, what
tells 2.3 from 2.0: `stack_version.py`), written as `diffusion_models/ltx-2.3_tiny_diffusers/`
with its latent upsampler in the folder's `latent_upsampler/`, as the 2.0 kit's. The name says
nothing to the server: the transformer's config does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from inline_core.diffusion.kit import seeded
from inline_core.diffusion.libs import diffusers
from inline_core.families.ltx2.kit import SEEDS, TRANSFORMER_CONFIG, LTX2Kit, build_upsampler
from inline_core.families.ltx2.kit import build_parts as build_ltx2_parts

FOLDER = "ltx-2.3_tiny_diffusers"


def build_parts() -> dict[str, Any]:
    """The tiny stack as `LTX2Pipeline` takes its parts, its transformer 2.3's."""
    parts = build_ltx2_parts()
    seeded(SEEDS["transformer"])
    parts["transformer"] = (
        diffusers()
        .LTX2VideoTransformer3DModel(
            **TRANSFORMER_CONFIG, cross_attn_mod=True, audio_cross_attn_mod=True
        )
        .eval()
    )
    return parts


def write_ltx23_kit(out: Path) -> LTX2Kit:
    """Write the tiny LTX-2.3 stack into the models folder `out`."""
    folder = out / "diffusion_models" / FOLDER
    diffusers().LTX2Pipeline(**build_parts()).save_pretrained(str(folder))
    build_upsampler(ltx20=False).save_pretrained(str(folder / "latent_upsampler"))
    return LTX2Kit(out, folder)
