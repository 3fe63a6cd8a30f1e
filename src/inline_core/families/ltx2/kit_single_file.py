"""A tiny LTX-2 stack in ComfyUI's layout: one all-in-one file in `checkpoints/` (every part but
Gemma under Lightricks' key names, their configs as Lightricks' JSON in its header's
`__metadata__["config"]`, as the real `ltx-2*.safetensors` files carry them), the Gemma 3
folder in `text_encoders/`, the latent upsampler in `latent_upscale_models/` and a LoRA in
`loras/` for the two-stage path; beside them the same weights as a diffusers folder, the reference a
render from the file must equal.

Lightricks' JSON states a video VAE by channel multipliers from an encoder as wide as the latents,
which the kit's narrow VAE is not; this stack's VAE is one it can state (128 channels, one 2x
resampler each way), and its transformer's rope is scaled by that VAE's factors, as a real
file's is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from inline_core.diffusion.adapters.kit import random_lora, write_lora
from inline_core.diffusion.kit import seeded
from inline_core.diffusion.libs import diffusers, save_safetensors
from inline_core.families.ltx2.checkpoint_keys import PARTS, to_checkpoint
from inline_core.families.ltx2.kit import (
    CONNECTORS_CONFIG,
    LATENT_CHANNELS,
    SEEDS,
    TRANSFORMER_CONFIG,
    build_parts,
    build_upsampler,
)
from inline_core.families.ltx2.upsampler_file import FIELDS as UPSAMPLER_FIELDS

FILE = "ltx-2-tiny.safetensors"
FOLDER = "ltx-2_tiny_split_diffusers"  # the same weights, as a diffusers folder
ENCODER_FOLDER = "gemma-3-tiny"
UPSAMPLER_FOLDER = "ltx-2-upsampler-tiny"  # in latent_upscale_models/
UPSAMPLER_FILE = "ltx-2-spatial-upscaler-x2-tiny.safetensors"  # Lightricks' file, same place
DISTILLED_LORA = "ltx-2-distilled-lora-tiny.safetensors"  # in loras/
FACTOR = 2  # the VAE's, in space and time
VAE_CONFIG: dict[str, Any] = {
    "latent_channels": LATENT_CHANNELS,
    "block_out_channels": (LATENT_CHANNELS,),
    "decoder_block_out_channels": (8,),
    "layers_per_block": (1, 1),
    "decoder_layers_per_block": (1, 1),
    "spatio_temporal_scaling": (True,),
    "decoder_spatio_temporal_scaling": (True,),
    "decoder_inject_noise": (False, False),
    "downsample_type": ("spatiotemporal",),
    "upsample_type": ("spatiotemporal",),
    "upsample_residual": (False,),
    "upsample_factor": (1,),
    "patch_size": 1,
    "patch_size_t": 1,
    "decoder_causal": False,
}
# The tiny stack's parts as Lightricks' JSON states them (what `single_file_config` reads).
LIGHTRICKS_CONFIG: dict[str, Any] = {
    "transformer": {
        "_class_name": "AVTransformer3DModel",
        "in_channels": LATENT_CHANNELS,
        "out_channels": LATENT_CHANNELS,
        "num_attention_heads": TRANSFORMER_CONFIG["num_attention_heads"],
        "attention_head_dim": TRANSFORMER_CONFIG["attention_head_dim"],
        "cross_attention_dim": TRANSFORMER_CONFIG["cross_attention_dim"],
        "num_layers": TRANSFORMER_CONFIG["num_layers"],
        "caption_channels": TRANSFORMER_CONFIG["caption_channels"],
        "audio_num_attention_heads": TRANSFORMER_CONFIG["audio_num_attention_heads"],
        "audio_attention_head_dim": TRANSFORMER_CONFIG["audio_attention_head_dim"],
        "audio_cross_attention_dim": TRANSFORMER_CONFIG["audio_cross_attention_dim"],
        "audio_out_channels": TRANSFORMER_CONFIG["audio_out_channels"],
        "activation_fn": "gelu-approximate",
        "attention_bias": True,
        "norm_elementwise_affine": False,
        "norm_eps": 1e-06,
        "qk_norm": "rms_norm",
        "positional_embedding_type": "rope",
        "positional_embedding_theta": 10000.0,
        "positional_embedding_max_pos": [20, 2048, 2048],
        "audio_positional_embedding_max_pos": [20],
        "timestep_scale_multiplier": 1000,
        "av_ca_timestep_scale_multiplier": 1000.0,
        "use_audio_video_cross_attention": True,
        "av_cross_ada_norm": True,
        "share_ff": False,
        "use_embeddings_connector": True,
        "connector_num_attention_heads": CONNECTORS_CONFIG["video_connector_num_attention_heads"],
        "connector_attention_head_dim": CONNECTORS_CONFIG["video_connector_attention_head_dim"],
        "connector_num_layers": CONNECTORS_CONFIG["video_connector_num_layers"],
        "connector_positional_embedding_max_pos": [
            CONNECTORS_CONFIG["connector_rope_base_seq_len"]
        ],
        "rope_type": "split",
        "frequencies_precision": "float32",
    },
    "vae": {
        "_class_name": "CausalVideoAutoencoder",
        "dims": 3,
        "in_channels": 3,
        "out_channels": 3,
        "latent_channels": LATENT_CHANNELS,
        "encoder_blocks": [
            ["res_x", {"num_layers": 1}],
            ["compress_all_res", {"multiplier": 1}],
            ["res_x", {"num_layers": 1}],
        ],
        "decoder_blocks": [
            ["res_x", {"num_layers": 1}],
            ["compress_all", {"multiplier": 1}],
            ["res_x", {"num_layers": 1}],
        ],
        "patch_size": 1,
        "causal_decoder": False,
        "encoder_base_channels": LATENT_CHANNELS,
        "decoder_base_channels": 8,
    },
    "audio_vae": {
        "model": {
            "params": {
                "ddconfig": {
                    "double_z": True,
                    "mel_bins": 8,
                    "z_channels": 2,
                    "resolution": 32,
                    "in_channels": 2,
                    "out_ch": 2,
                    "ch": 4,
                    "ch_mult": [1],
                    "num_res_blocks": 1,
                    "attn_resolutions": [],
                    "dropout": 0.0,
                    "mid_block_add_attention": False,
                    "norm_type": "pixel",
                    "causality_axis": "height",
                },
                "sampling_rate": 16000,
            }
        },
        "preprocessing": {
            "audio": {"sampling_rate": 16000, "stereo": True},
            "stft": {"hop_length": 160, "causal": True},
            "mel": {"n_mel_channels": 8},
        },
    },
    "vocoder": {
        "upsample_initial_channel": 32,
        "resblock": "1",
        "upsample_rates": [8, 5, 4],
        "upsample_kernel_sizes": [16, 10, 8],
        "resblock_kernel_sizes": [3],
        "resblock_dilation_sizes": [[1, 3, 5]],
        "stereo": True,
    },
}


@dataclass(frozen=True)
class SingleFileKit:
    root: Path
    file: Path  # checkpoints/ltx-2-tiny.safetensors
    encoder: Path  # text_encoders/gemma-3-tiny (its tokenizer inside)
    folder: Path  # the same weights as a diffusers folder


def build_single_file_parts() -> dict[str, Any]:
    """The kit's stack with a VAE Lightricks' JSON can state, and its transformer's rope scaled
    by that VAE's factors."""
    lib = diffusers()
    parts = build_parts()
    seeded(SEEDS["transformer"])
    factors = (FACTOR, FACTOR, FACTOR)
    parts["transformer"] = lib.LTX2VideoTransformer3DModel(
        **TRANSFORMER_CONFIG, vae_scale_factors=factors
    ).eval()
    seeded(SEEDS["vae"])
    parts["vae"] = lib.AutoencoderKLLTX2Video(**VAE_CONFIG).eval()
    return parts


def write_checkpoint(
    path: Path, weights: dict[str, dict[str, torch.Tensor]], config: dict[str, Any] | None
) -> None:
    """One file of these parts' weights (diffusers' names, by part), as Lightricks' (and
    ComfyUI's) all-in-one files name them, with the two VAE statistics no diffusers class holds;
    `config`: the Lightricks JSON its header carries (None: none)."""
    state: dict[str, torch.Tensor] = {}
    for part, tensors in weights.items():
        names = to_checkpoint(part, tensors)
        state.update({names[k]: v.contiguous() for k, v in tensors.items()})
    if "vae" in weights:
        channels = weights["vae"]["latents_mean"].shape[0]
        state["vae.per_channel_statistics.channel"] = torch.arange(channels, dtype=torch.float32)
        state["vae.per_channel_statistics.mean-of-stds"] = torch.ones(channels)
    path.parent.mkdir(parents=True, exist_ok=True)
    metadata = None if config is None else {"config": json.dumps(config)}
    save_safetensors(state, path, metadata)


def write_single_file_kit(out: Path) -> SingleFileKit:
    """The tiny stack in ComfyUI's layout, and as a diffusers folder, in the models folder `out`."""
    parts = build_single_file_parts()
    file = out / "checkpoints" / FILE
    weights = {part: dict(parts[part].state_dict()) for part in PARTS}
    write_checkpoint(file, weights, LIGHTRICKS_CONFIG)
    encoder = out / "text_encoders" / ENCODER_FOLDER
    parts["text_encoder"].save_pretrained(str(encoder))
    parts["tokenizer"].save_pretrained(str(encoder))
    folder = out / "diffusion_models" / FOLDER
    diffusers().LTX2Pipeline(**parts).save_pretrained(str(folder))
    build_upsampler().save_pretrained(str(out / "latent_upscale_models" / UPSAMPLER_FOLDER))
    write_distilled_lora(parts["transformer"], out / "loras" / DISTILLED_LORA)
    return SingleFileKit(out, file, encoder, folder)


def write_distilled_lora(transformer: Any, path: Path) -> Path:
    """A random LoRA on the transformer's self-attention (the distilled LoRA's stand-in for
    the refining pass), in Lightricks' (ComfyUI's) naming."""
    blocks = len(transformer.transformer_blocks)
    layers = [
        f"transformer_blocks.{i}.{attn}.{p}"
        for i in range(blocks)
        for attn in ("attn1", "audio_attn1")
        for p in ("to_q", "to_k", "to_v", "to_out.0")
    ]
    lora = random_lora(transformer, layers, 4, SEEDS["transformer"] + 100)
    down, up = ".lora_A.weight", ".lora_B.weight"
    return write_lora(lora, path, "diffusion_model.".__add__, down=down, up=up)


def write_upsampler_file(upsampler: Any, path: Path) -> Path:
    """A diffusers latent upsampler as Lightricks' file: its weights under the same names, its
    config as Lightricks' JSON in the header (`upsampler_file.FIELDS`, the other way)."""
    config = dict(upsampler.config)
    lightricks = {field: config[name] for field, (name, _default) in UPSAMPLER_FIELDS.items()}
    state = {k: v.contiguous() for k, v in upsampler.state_dict().items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    metadata = {"config": json.dumps({"_class_name": "LatentUpsampler", **lightricks})}
    save_safetensors(state, path, metadata)
    return path
