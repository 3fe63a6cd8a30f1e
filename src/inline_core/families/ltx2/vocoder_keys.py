"""LTX-2's vocoder in ComfyUI's all-in-one checkpoint (`vocoder.*`) against diffusers' naming
(torch-free). diffusers' single-file loader has no converter for it; the renames are those of
diffusers' own conversion script (`scripts/convert_ltx2_to_diffusers.py`): LTX-2.0's HiFi-GAN
(`LTX2Vocoder`: `ups`, `resblocks`, `conv_pre`, `conv_post`), and LTX-2.3's vocoder with its
bandwidth extension (`LTX2VocoderWithBWE`: its `vocoder.`, `bwe_generator.` and `mel_stft.`,
their anti-aliased activations' `upsample`/`downsample.lowpass` filters beside `.ups.`)."""

from __future__ import annotations

from inline_core.families.ltx2.key_renames import Renames, rename

PREFIX = "vocoder."  # its keys' prefix in the checkpoint
RENAMES: Renames = (
    ("ups", "upsamplers"),
    ("resblocks", "resnets"),
    ("conv_pre", "conv_in"),
    ("conv_post", "conv_out"),
)
# LTX-2.3's: `ups` only as a whole name (its activations' `upsample` filters keep theirs).
BWE_PARTS = ("vocoder.", "bwe_generator.", "mel_stft.")
BWE_RENAMES: Renames = (
    ("resblocks", "resnets"),
    ("conv_pre", "conv_in"),
    ("conv_post", "conv_out"),
    ("act_post", "act_out"),
    ("downsample.lowpass", "downsample"),
    (".ups.", ".upsamplers."),
)


def to_diffusers(key: str) -> str | None:
    """A checkpoint key as the vocoder class's (None: not the vocoder's)."""
    if not key.startswith(PREFIX):
        return None
    inner = key[len(PREFIX) :]
    if inner.startswith(BWE_PARTS):
        return rename(inner, BWE_RENAMES)
    return rename(inner, RENAMES)


def from_diffusers(key: str) -> str:
    """A vocoder class's key as the checkpoint names it."""
    if key.startswith(BWE_PARTS):
        return PREFIX + rename(key, BWE_RENAMES, reverse=True)
    return PREFIX + rename(key, RENAMES, reverse=True)
