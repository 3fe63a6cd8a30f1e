"""LTX-2's all-in-one checkpoint (Lightricks' single file, as ComfyUI reads it from
`models/checkpoints/`) against diffusers' naming, part by part, both ways (torch-free): the one
place that knows the file's keys.

The file holds the transformer and the two text connectors under `model.diffusion_model.`, the
projection of Gemma's stacked layers (`text_embedding_projection.`), the video VAE (`vae.`), the
audio VAE (`audio_vae.`) and the vocoder (`vocoder.`). The renames are those of diffusers'
conversion script (`scripts/convert_ltx2_to_diffusers.py`), written here by block index rather
than as a fixed table, so that they also hold where diffusers' single-file converters do not
(issue #14145, LTX-2.3's combined file): the transformer's `prompt_adaln_single` and
`audio_prompt_adaln_single`, and a video decoder of more than three up blocks. Keys of no
part (e.g. `duration_head.`) are not read."""

from __future__ import annotations

import re
from collections.abc import Iterable

from inline_core.families.ltx2 import connector_keys, vocoder_keys
from inline_core.families.ltx2.key_renames import Renames, rename

TRANSFORMER, CONNECTORS, VAE, AUDIO_VAE, VOCODER = (
    "transformer",
    "connectors",
    "vae",
    "audio_vae",
    "vocoder",
)
PARTS = (TRANSFORMER, CONNECTORS, VAE, AUDIO_VAE, VOCODER)
DIFFUSION_MODEL = connector_keys.MODEL_PREFIX  # "model.diffusion_model."
VAE_PREFIX, AUDIO_VAE_PREFIX = "vae.", "audio_vae."

TRANSFORMER_RENAMES: Renames = (
    ("audio_patchify_proj", "audio_proj_in"),
    ("patchify_proj", "proj_in"),
    ("av_ca_video_scale_shift_adaln_single", "av_cross_attn_video_scale_shift"),
    ("av_ca_a2v_gate_adaln_single", "av_cross_attn_video_a2v_gate"),
    ("av_ca_audio_scale_shift_adaln_single", "av_cross_attn_audio_scale_shift"),
    ("av_ca_v2a_gate_adaln_single", "av_cross_attn_audio_v2a_gate"),
    ("scale_shift_table_a2v_ca_video", "video_a2v_cross_attn_scale_shift_table"),
    ("scale_shift_table_a2v_ca_audio", "audio_a2v_cross_attn_scale_shift_table"),
    ("q_norm", "norm_q"),
    ("k_norm", "norm_k"),
)
# The timestep embedders, renamed by their whole first name (their names are parts of others').
TRANSFORMER_HEADS = {
    "adaln_single": "time_embed",
    "audio_adaln_single": "audio_time_embed",
    "prompt_adaln_single": "prompt_adaln",
    "audio_prompt_adaln_single": "audio_prompt_adaln",
}
# The VAEs' latent statistics; the file's other two statistics no diffusers VAE holds.
STATISTICS: Renames = (
    ("per_channel_statistics.mean-of-means", "latents_mean"),
    ("per_channel_statistics.std-of-means", "latents_std"),
)
UNUSED_STATISTICS = ("per_channel_statistics.channel", "per_channel_statistics.mean-of-stds")
_BLOCK = re.compile(r"^(encoder\.down_blocks|decoder\.up_blocks)\.(\d+)\.(.*)$")
_DIFFUSERS_BLOCK = re.compile(
    r"^(encoder\.down_blocks|decoder\.up_blocks)\.(\d+)\.(downsamplers\.0\.|upsamplers\.0\.)?(.*)$"
)


def transformer_to_diffusers(inner: str) -> str:
    """A transformer key (its `model.diffusion_model.` cut) as `LTX2VideoTransformer3DModel`'s."""
    head, dot, rest = inner.partition(".")
    if head in TRANSFORMER_HEADS:
        return TRANSFORMER_HEADS[head] + dot + rest
    return rename(inner, TRANSFORMER_RENAMES)


def transformer_from_diffusers(key: str) -> str:
    head, dot, rest = key.partition(".")
    back = {new: old for old, new in TRANSFORMER_HEADS.items()}
    if head in back:
        return back[head] + dot + rest
    return rename(key, TRANSFORMER_RENAMES, reverse=True)


def vae_to_diffusers(inner: str, down_blocks: int) -> str | None:
    """A video VAE key (its `vae.` cut) as `AutoencoderKLLTX2Video`'s; None: a statistic it does
    not hold. The file numbers each block and each resampler in one list: down block i is its
    2i-th entry, its downsampler the next, and the encoder's middle block the last
    (`down_blocks` blocks: entry 2 * down_blocks); the decoder starts with its middle block, then
    each up block's upsampler and the block itself."""
    if inner.startswith(UNUSED_STATISTICS):
        return None
    inner = rename(inner, (*STATISTICS, ("res_blocks", "resnets")))
    match = _BLOCK.match(inner)
    if match is None:
        return inner
    where, index, rest = match.group(1), int(match.group(2)), match.group(3)
    side = where.partition(".")[0]
    if where == "encoder.down_blocks":
        if index == 2 * down_blocks:
            return f"{side}.mid_block.{rest}"
        sampler = "downsamplers.0." if index % 2 else ""
        return f"{where}.{index // 2}.{sampler}{rest}"
    if index == 0:
        return f"{side}.mid_block.{rest}"
    sampler = "upsamplers.0." if index % 2 else ""
    return f"{where}.{(index - 1) // 2}.{sampler}{rest}"


def vae_from_diffusers(key: str, down_blocks: int) -> str:
    key = rename(key, (*STATISTICS, ("res_blocks", "resnets")), reverse=True)
    if key.startswith("encoder.mid_block."):
        return f"encoder.down_blocks.{2 * down_blocks}." + key[len("encoder.mid_block.") :]
    if key.startswith("decoder.mid_block."):
        return "decoder.up_blocks.0." + key[len("decoder.mid_block.") :]
    match = _DIFFUSERS_BLOCK.match(key)
    if match is None:
        return key
    where, index, sampler, rest = match.groups()
    i = int(index)
    if where == "encoder.down_blocks":
        return f"{where}.{2 * i + (1 if sampler else 0)}.{rest}"
    return f"{where}.{2 * i + (1 if sampler else 2)}.{rest}"


def down_blocks_of(vae_keys: Iterable[str]) -> int:
    """How many down blocks a checkpoint's video VAE has: its encoder's list holds two entries
    a block and its middle block last."""
    indices = [int(m.group(2)) for k in vae_keys if (m := _BLOCK.match(k)) and k.startswith("enc")]
    return max(indices, default=0) // 2


def diffusers_down_blocks(keys: Iterable[str]) -> int:
    """How many down blocks an `AutoencoderKLLTX2Video` state has."""
    indices = [
        int(m.group(2)) for k in keys if (m := _DIFFUSERS_BLOCK.match(k)) and k.startswith("enc")
    ]
    return max(indices, default=-1) + 1


def audio_vae_to_diffusers(inner: str) -> str | None:
    if inner.startswith(UNUSED_STATISTICS):
        return None
    return rename(inner, STATISTICS)


def split(keys: Iterable[str]) -> dict[str, dict[str, str]]:
    """Each part's keys in the checkpoint -> its diffusers class's names for them (parts the
    file does not hold are empty)."""
    keys = list(keys)
    vae_inner = [k[len(VAE_PREFIX) :] for k in keys if k.startswith(VAE_PREFIX)]
    down = down_blocks_of(vae_inner)
    parts: dict[str, dict[str, str]] = {part: {} for part in PARTS}
    for key in keys:
        part, name = _part_key(key, down)
        if part is not None and name is not None:
            parts[part][key] = name
    return parts


def _part_key(key: str, down_blocks: int) -> tuple[str | None, str | None]:
    connector = connector_keys.to_diffusers(key)
    if connector is not None:
        return CONNECTORS, connector
    if key.startswith(DIFFUSION_MODEL):
        return TRANSFORMER, transformer_to_diffusers(key[len(DIFFUSION_MODEL) :])
    if key.startswith(VAE_PREFIX):
        return VAE, vae_to_diffusers(key[len(VAE_PREFIX) :], down_blocks)
    if key.startswith(AUDIO_VAE_PREFIX):
        return AUDIO_VAE, audio_vae_to_diffusers(key[len(AUDIO_VAE_PREFIX) :])
    vocoder = vocoder_keys.to_diffusers(key)
    if vocoder is not None:
        return VOCODER, vocoder
    return None, None


def to_checkpoint(part: str, keys: Iterable[str]) -> dict[str, str]:
    """A part's diffusers keys -> the checkpoint's names for them (what a single file of these
    weights holds)."""
    keys = list(keys)
    if part == TRANSFORMER:
        return {k: DIFFUSION_MODEL + transformer_from_diffusers(k) for k in keys}
    if part == CONNECTORS:
        return {k: connector_keys.from_diffusers(k) for k in keys}
    if part == VAE:
        down = diffusers_down_blocks(keys)
        return {k: VAE_PREFIX + vae_from_diffusers(k, down) for k in keys}
    if part == AUDIO_VAE:
        return {k: AUDIO_VAE_PREFIX + rename(k, STATISTICS, reverse=True) for k in keys}
    if part == VOCODER:
        return {k: vocoder_keys.from_diffusers(k) for k in keys}
    raise ValueError(f"an LTX-2 checkpoint has no part {part!r}")
