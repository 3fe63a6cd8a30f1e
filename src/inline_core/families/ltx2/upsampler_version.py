"""Which LTX-2 a spatial x2 latent upsampler was made for, read from its own files at submit
(torch-free), so a stack never takes another version's upsampler unnoticed.

Neither Lightricks' files nor diffusers' folders state a version. What tells them apart is the
layer that doubles the width and height:
- LTX-2.0's (`ltx-2-spatial-upscaler-x2-1.0`) is the rational resampler: a conv to 4x the
  channels, a pixel shuffle and a stride-1 blur, its weights `upsampler.conv.*` and
  `upsampler.blur_down.kernel`; its config says `"rational_resampler": true` (Lightricks' JSON in
  the header, `upsampler_file.py`) or `"use_rational_resampler": true` (a diffusers folder).
- LTX-2.3's (`ltx-2.3-spatial-upscaler-x2-1.0/-1.1`) is a plain conv and pixel shuffle, its
  weights `upsampler.0.*`; `rational_resampler` false (Lightricks' default when left out).
  LTX-2.5's (`ltx-2.5-latent-spatial-upscaler-x2-bf16-1.0`) is built the same way: third-party
  ports that transcribe its header (in the stored code index) read `rational_resampler: false`
  and `upsampler.0.weight` of 4x1024 by 1024 by 3x3; so a plain one is "LTX-2.3 or later".

Sources: diffusers `scripts/convert_ltx2_to_diffusers.py` (`get_ltx2_spatial_latent_upsampler_
config`: "2.0" -> `use_rational_resampler: True`, "2.3" -> `False`, each loaded with
`load_state_dict(strict=True)`, so the released files hold those keys); diffusers
`pipelines/ltx2/latent_upsampler.py` (`SpatialRationalResampler`: `conv`, `blur_down.kernel`;
the plain branch `nn.Sequential(Conv2d, PixelShuffleND)`; the class default `True`);
comfyanonymous/ComfyUI `comfy/ldm/lightricks/latent_upsampler.py` (`LatentUpsampler.from_config`:
`rational_resampler` default False; its `LatentUpscaleModelLoader` builds it from the header's
config). The sizes and the other fields are the same in both versions' configs, and a plain
upsampler made for LTX-2.3 cannot be told from one made for 2.5: the take names the upsampler
that ran (`upscale_model`).
"""

from __future__ import annotations

from pathlib import Path

from inline_core.contract.files import read_json
from inline_core.families.ltx2.upsampler_file import UpsamplerFileError, diffusers_config
from inline_core.families.ltx2.versions import LTX2, LTX23, LTX25

RATIONAL = "use_rational_resampler"  # diffusers' name; Lightricks' is `rational_resampler`
# The versions as a message names them.
NAMES = {LTX2: "LTX-2.0", LTX23: "LTX-2.3", LTX25: "LTX-2.5"}
LATER = "LTX-2.3 or later"  # what a plain x2 upsampler was made for


def made_for_ltx20(path: Path, is_folder: bool) -> bool:
    """Whether the upsampler at `path` is LTX-2.0's (its rational resampler); raises
    `UpsamplerFileError` for a file whose config cannot be read (`upsampler_file.problem`)."""
    if is_folder:
        config = read_json(path / "config.json") or {}
        return bool(config.get(RATIONAL, True))  # diffusers' class default
    return bool(diffusers_config(path)[RATIONAL])


def fits(path: Path, is_folder: bool, version: str) -> bool:
    """Whether the upsampler was made for a stack of `version` (a row of `versions.py`); False
    where its config cannot be read."""
    try:
        return made_for_ltx20(path, is_folder) == (version == LTX2)
    except UpsamplerFileError:
        return False


def mismatch(path: Path, is_folder: bool, version: str) -> str:
    """Why a readable upsampler that does not `fit` a stack of `version` is refused, naming both
    versions and the file."""
    rational = made_for_ltx20(path, is_folder)
    layer = "the rational resampler" if rational else "a plain pixel shuffle"
    return (
        f"the latent upsampler {path} was made for {NAMES[LTX2] if rational else LATER} (its x2 "
        f"layer is {layer}), and this model is {NAMES[version]}: each LTX-2 version upsamples "
        f"its own latents, so give {NAMES[version]}'s upsampler"
    )
