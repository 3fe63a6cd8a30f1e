"""The configs of ComfyUI's all-in-one LTX-2 checkpoint (`checkpoints/ltx-2*.safetensors`) as
diffusers' classes take them (torch-free).

Lightricks' file carries every part's config as one JSON in its header's
`__metadata__["config"]`: `transformer` (its `AVTransformer3DModel`, the text connectors' settings
among its fields), `vae` (`CausalVideoAutoencoder`: its blocks as a list), `audio_vae` (a
`ddconfig` and the mel preprocessing) and `vocoder` (HiFi-GAN). Each reader here turns one into
the keyword arguments of `LTX2VideoTransformer3DModel`, `LTX2TextConnectors`,
`AutoencoderKLLTX2Video`, `AutoencoderKLLTX2Audio` or `LTX2Vocoder`, as diffusers' conversion
script (`scripts/convert_ltx2_to_diffusers.py`) configures LTX-2.0 and 2.3. Widths the JSON does
not state are read from the header's shapes. The loader builds each part and loads its keys
strictly, so a layout read wrong is an error naming the file, never a silent render of noise;
what no shape shows (rope, padding) follows Lightricks' own defaults.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, cast

from inline_core.diffusion.files.header import HEADERS, HeaderError, TensorInfo, read_metadata
from inline_core.families.ltx2 import checkpoint_keys
from inline_core.families.ltx2.single_file_fields import Fields, SingleFileError
from inline_core.families.ltx2.single_file_vae_config import (
    audio_vae_config,
    vae_config,
    vae_factors,
    vocoder_config,
)

__all__ = ["Layout", "SingleFileError", "layout", "part_configs", "read_config"]

VIDEO_PROJECTION = "text_embedding_projection.video_aggregate_embed.weight"
PROJECTION = "text_embedding_projection.aggregate_embed.weight"
AUDIO_PROJ_IN = "model.diffusion_model.audio_patchify_proj.weight"
CAPTION_PROJECTION = "model.diffusion_model.caption_projection.linear_1.weight"
SECTIONS = ("transformer", "vae", "audio_vae", "vocoder")
AUDIO_LATENT_FRAMES = 4  # mel frames a latent frame: diffusers' audio VAE's, whatever its ch_mult


@dataclass(frozen=True)
class Layout:
    """What the loader needs of one all-in-one file: each part's diffusers config, and its keys
    in the file against diffusers' names."""

    configs: dict[str, dict[str, Any]]
    names: dict[str, dict[str, str]]


def layout(path: Path) -> Layout:
    """The file's parts, read from its header alone (once per version of the file: submit and
    every part's load ask). Raises `SingleFileError` saying what is wrong or missing (the
    caller names the file)."""
    try:
        stat = path.stat()
    except OSError as exc:
        raise SingleFileError(f"its header cannot be read ({exc})") from exc
    return _layout(str(path), stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=8)
def _layout(path: str, _size: int, _mtime: int) -> Layout:
    try:
        header = HEADERS.get(Path(path))
        metadata = read_metadata(Path(path))
    except (HeaderError, OSError) as exc:
        raise SingleFileError(f"its header cannot be read ({exc})") from exc
    names = checkpoint_keys.split(header)
    absent = [part for part in checkpoint_keys.PARTS if not names[part]]
    if absent:
        raise SingleFileError(f"it holds no {', '.join(absent)} weights")
    return Layout(part_configs(read_config(metadata), header), names)


def read_config(metadata: Mapping[str, str]) -> dict[str, Any]:
    """The file's Lightricks config, its four sections checked present."""
    raw = metadata.get("config")
    if raw is None:
        raise SingleFileError(
            "its header has no __metadata__['config'] (Lightricks' JSON of its parts' configs)"
        )
    try:
        parsed: object = json.loads(raw)
    except ValueError as exc:
        raise SingleFileError(f"its __metadata__['config'] is not JSON ({exc})") from exc
    if not isinstance(parsed, dict):
        raise SingleFileError("its __metadata__['config'] is not a JSON object")
    config = cast(dict[str, Any], parsed)
    absent = [s for s in SECTIONS if not isinstance(config.get(s), dict)]
    if absent:
        raise SingleFileError(f"its config has no {', '.join(absent)} section")
    return config


def part_configs(
    config: Mapping[str, Any], header: Mapping[str, TensorInfo]
) -> dict[str, dict[str, Any]]:
    """Each part's diffusers config (keyword arguments), from the file's config and shapes."""
    vae = vae_config(Fields(config["vae"], "vae"), header)
    audio = Fields(config["audio_vae"], "audio_vae")
    transformer = Fields(config["transformer"], "transformer")
    return {
        "transformer": transformer_config(transformer, vae, audio, header),
        "connectors": connectors_config(transformer, header),
        "vae": vae,
        "audio_vae": audio_vae_config(audio),
        "vocoder": vocoder_config(Fields(config["vocoder"], "vocoder"), audio, header),
    }


def _shape(header: Mapping[str, TensorInfo], key: str) -> tuple[int, ...]:
    info = header.get(key)
    if info is None:
        raise SingleFileError(f"it has no tensor {key}")
    return info.shape


def transformer_config(
    t: Fields, vae: Mapping[str, Any], audio: Fields, header: Mapping[str, TensorInfo]
) -> dict[str, Any]:
    for name, released in (
        ("positional_embedding_type", "rope"),
        ("use_audio_video_cross_attention", True),
        ("av_cross_ada_norm", True),
        ("share_ff", False),
        ("double_self_attention", False),
        ("only_cross_attention", False),
        ("upcast_attention", False),
    ):
        t.expect(name, released)
    spatial, temporal = vae_factors(vae)
    max_pos = t.ints("positional_embedding_max_pos", 3)
    gated = t.boolean("apply_gated_attention", False)
    prompt_modulation = t.boolean("cross_attention_adaln", False)
    qk_norm = t.text("qk_norm")
    mel = audio.section("preprocessing")
    return {
        "in_channels": t.integer("in_channels"),
        "out_channels": t.integer("out_channels"),
        "patch_size": 1,
        "patch_size_t": 1,
        "num_attention_heads": t.integer("num_attention_heads"),
        "attention_head_dim": t.integer("attention_head_dim"),
        "cross_attention_dim": t.integer("cross_attention_dim"),
        "vae_scale_factors": (temporal, spatial, spatial),
        "pos_embed_max_pos": max_pos[0],
        "base_height": max_pos[1],
        "base_width": max_pos[2],
        "gated_attn": gated,
        "cross_attn_mod": prompt_modulation,
        # The JSON does not say the audio latents' width: its input projection does.
        "audio_in_channels": _shape(header, AUDIO_PROJ_IN)[1],
        "audio_out_channels": t.integer("audio_out_channels"),
        "audio_num_attention_heads": t.integer("audio_num_attention_heads"),
        "audio_attention_head_dim": t.integer("audio_attention_head_dim"),
        "audio_cross_attention_dim": t.integer("audio_cross_attention_dim"),
        "audio_scale_factor": AUDIO_LATENT_FRAMES,
        "audio_pos_embed_max_pos": t.ints("audio_positional_embedding_max_pos", 1)[0],
        "audio_sampling_rate": mel.section("audio").integer("sampling_rate"),
        "audio_hop_length": mel.section("stft").integer("hop_length"),
        "audio_gated_attn": gated,
        "audio_cross_attn_mod": prompt_modulation,
        "num_layers": t.integer("num_layers"),
        "activation_fn": t.text("activation_fn"),
        # Lightricks' q/k RMS norm spans all heads: diffusers' "rms_norm_across_heads".
        "qk_norm": "rms_norm_across_heads" if qk_norm == "rms_norm" else qk_norm,
        "norm_elementwise_affine": t.boolean("norm_elementwise_affine", False),
        "norm_eps": t.number("norm_eps"),
        "caption_channels": t.integer("caption_channels"),
        "attention_bias": t.boolean("attention_bias", True),
        "attention_out_bias": t.boolean("attention_bias", True),
        "rope_theta": t.number("positional_embedding_theta"),
        "rope_double_precision": t.get("frequencies_precision") == "float64",
        "causal_offset": 1,
        "timestep_scale_multiplier": t.integer("timestep_scale_multiplier"),
        "cross_attn_timestep_scale_multiplier": int(t.number("av_ca_timestep_scale_multiplier", 1)),
        "rope_type": t.text("rope_type", "interleaved"),
        # LTX-2.0 projects the captions in the transformer; 2.3 in the connectors.
        "use_prompt_embeddings": CAPTION_PROJECTION in header,
    }


def connectors_config(t: Fields, header: Mapping[str, TensorInfo]) -> dict[str, Any]:
    caption = t.integer("caption_channels")
    per_stream = VIDEO_PROJECTION in header
    stacked = _shape(header, VIDEO_PROJECTION if per_stream else PROJECTION)[1]
    if stacked % caption:
        raise SingleFileError(
            f"its text projection takes {stacked} features, not a multiple of the "
            f"{caption} caption channels"
        )
    heads = t.integer("connector_num_attention_heads")
    head_dim = t.integer("connector_attention_head_dim")
    layers = t.integer("connector_num_layers")
    registers = t.get("connector_num_learnable_registers")
    gated = t.boolean("connector_apply_gated_attention", False)
    config: dict[str, Any] = {
        "caption_channels": caption,
        "text_proj_in_factor": stacked // caption,
        "video_connector_num_attention_heads": heads,
        "video_connector_attention_head_dim": head_dim,
        "video_connector_num_layers": layers,
        "video_connector_num_learnable_registers": registers,
        "video_gated_attn": gated,
        # LTX-2.0 states one connector's settings; 2.3 the audio connector's beside them.
        "audio_connector_num_attention_heads": t.integer(
            "audio_connector_num_attention_heads", heads
        ),
        "audio_connector_attention_head_dim": t.integer(
            "audio_connector_attention_head_dim", head_dim
        ),
        "audio_connector_num_layers": layers,
        "audio_connector_num_learnable_registers": registers,
        "audio_gated_attn": gated,
        "connector_rope_base_seq_len": t.ints("connector_positional_embedding_max_pos", 1)[0],
        "rope_theta": t.number("positional_embedding_theta"),
        "rope_double_precision": t.get("frequencies_precision") == "float64",
        "causal_temporal_positioning": False,
        "rope_type": t.text("rope_type", "interleaved"),
        "per_modality_projections": per_stream,
        "proj_bias": (VIDEO_PROJECTION if per_stream else PROJECTION).replace("weight", "bias")
        in header,
    }
    if per_stream:
        config["video_hidden_dim"] = t.integer("num_attention_heads") * t.integer(
            "attention_head_dim"
        )
        config["audio_hidden_dim"] = t.integer("audio_num_attention_heads") * t.integer(
            "audio_attention_head_dim"
        )
    return config
