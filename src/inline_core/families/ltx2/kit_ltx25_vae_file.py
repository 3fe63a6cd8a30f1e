"""The tiny LTX-2.5 diffusion decoder as ComfyUI's video VAE file (`vae/ltx-2.5-video-vae-*`,
`diffusion_vae_file.py` says what it holds), offline: its weights under ComfyUI's module names
(the QKV fused, diffusers' renames undone), its statistics as `per_channel_statistics.*`, and
its config as Lightricks' JSON in the header's `"vae"` object, as ComfyUI reads it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from inline_core.diffusion.libs import save_safetensors
from inline_core.families.ltx2.diffusion_vae_file import STATISTICS
from inline_core.families.ltx2.diffusion_vae_load import FUSED, RENAMES

FILE = "ltx-2.5-video-vae-tiny.safetensors"  # in vae/, as ComfyUI's templates keep theirs


def comfy_state(decoder: Any) -> dict[str, torch.Tensor]:
    """The decoder's tensors under the file's names."""
    state: dict[str, torch.Tensor] = dict(decoder.state_dict())
    mean, std = STATISTICS
    out = {mean: state["latents_mean"], std: state["latents_std"]}
    out["per_channel_statistics.mean-of-stds"] = torch.ones_like(state["latents_std"])
    for key, value in state.items():
        if not key.startswith("decoder."):
            continue
        if ".attn.to_q." in key:
            head, _, leaf = key.rpartition(".attn.to_q.")
            parts = [state[f"{head}.attn.to_{n}.{leaf}"] for n in ("q", "k", "v")]
            out[f"{head}{FUSED}{leaf}"] = torch.cat(parts)
            continue
        if ".attn.to_k." in key or ".attn.to_v." in key:
            continue
        for old, new in RENAMES.items():
            key = key.replace(new, old)
        out[key] = value
    return {k: v.contiguous() for k, v in out.items()}


def comfy_config(decoder: Any) -> dict[str, Any]:
    """The decoder's config as ComfyUI's `CausalDiffusionVAE` takes it (the header's "vae")."""
    c = dict(decoder.config)
    strides = [list(s) for s in c["decoder_upsample_strides"]]
    reductions = c["decoder_upsample_channel_reductions"]
    return {
        "_class_name": "CausalDiffusionVAE",
        "model_output_type": c["decoder_model_output_type"],
        "decoder": {
            "in_channels": c["latent_channels"],
            "out_channels": c["out_channels"],
            "patch_size": c["patch_size"],
            "head_dim": c["decoder_head_dim"],
            "stage_channels": list(c["decoder_stage_channels"]),
            "stage_depths": list(c["decoder_stage_depths"]),
            "stage_kernels": [list(k) for k in c["decoder_stage_kernels"]]
            + [list(c["decoder_stage5_kernel"])],
            "upsamples": [[s, r] for s, r in zip(strides, reductions, strict=True)],
            "stage5_kernel": list(c["decoder_stage5_kernel"]),
            "t_emb_dim": c["decoder_t_emb_dim"],
            "timestep_scale_multiplier": c["decoder_timestep_scale_multiplier"],
            "default_num_inference_steps": c["decoder_num_inference_steps"],
        },
    }


def write_diffusion_vae_file(decoder: Any, path: Path) -> Path:
    """Write the diffusers decoder `decoder` as ComfyUI's LTX-2.5 video VAE file at `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    metadata = {"config": json.dumps({"vae": comfy_config(decoder)})}
    save_safetensors(comfy_state(decoder), path, metadata)
    return path
