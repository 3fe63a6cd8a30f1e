"""LTX-2's vocoder in ComfyUI's all-in-one checkpoint (`vocoder.*`) against diffusers'
`LTX2Vocoder` naming (torch-free). diffusers' single-file loader has no converter for it; the
renames are those of diffusers' own conversion script (`scripts/convert_ltx2_to_diffusers.py`):
HiFi-GAN's `ups`, `resblocks`, `conv_pre` and `conv_post`."""

from __future__ import annotations

from inline_core.families.ltx2.key_renames import Renames, rename

PREFIX = "vocoder."  # its keys' prefix in the checkpoint
RENAMES: Renames = (
    ("ups", "upsamplers"),
    ("resblocks", "resnets"),
    ("conv_pre", "conv_in"),
    ("conv_post", "conv_out"),
)


def to_diffusers(key: str) -> str | None:
    """A checkpoint key as `LTX2Vocoder`'s (None: not the vocoder's)."""
    if not key.startswith(PREFIX):
        return None
    return rename(key[len(PREFIX) :], RENAMES)


def from_diffusers(key: str) -> str:
    """An `LTX2Vocoder` key as the checkpoint names it."""
    return PREFIX + rename(key, RENAMES, reverse=True)
