"""LTX-2.5's diffusion video decoder read from ComfyUI's VAE file (torch;
`diffusion_vae_file.py` says what the file holds): built from its header's config and loaded
strictly, its keys turned into diffusers' as diffusers' converter turns them, so a file read
wrong is an error naming the keys, never a blurred video."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from inline_core.diffusion.libs import load_safetensors, module
from inline_core.errors import RunFailed
from inline_core.families.ltx2.diffusion_vae_file import (
    STATISTICS,
    diffusers_config,
    problem,
)
from inline_core.families.ltx2.strict_load import built_strictly

# diffusers' `LTX_2_5_DIFFUSION_DECODER_RENAME_DICT` (scripts/convert_ltx2_to_diffusers.py).
RENAMES = {
    "t_embedder.mlp.0.": "t_embedder.timestep_embedder.linear_1.",
    "t_embedder.mlp.2.": "t_embedder.timestep_embedder.linear_2.",
    ".attn.proj.": ".attn.to_out.0.",
    ".attn.q_norm.": ".attn.norm_q.",
    ".attn.k_norm.": ".attn.norm_k.",
}
FUSED = ".attn.qkv."


def diffusers_state(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The file's tensors under diffusers' names: the decoder half renamed, its fused QKV split
    in three, the statistics as `latents_mean`/`latents_std`; the encoder and the preview
    heads (`coarse_*`) left out, as diffusers' converter leaves them."""
    mean, std = STATISTICS
    out = {"latents_mean": state[mean], "latents_std": state[std]}
    for key, value in state.items():
        if not key.startswith("decoder.") or ".coarse_" in key:
            continue
        for old, new in RENAMES.items():
            key = key.replace(old, new)
        if FUSED in key:
            head, _, leaf = key.rpartition(FUSED)
            for name, part in zip(("to_q", "to_k", "to_v"), value.chunk(3, dim=0), strict=True):
                out[f"{head}.attn.{name}.{leaf}"] = part.clone()
            continue
        out[key] = value
    return out


def load_decoder_file(path: Path, dtype: torch.dtype) -> nn.Module:
    """The `LTX2VideoDiffusionDecoderModel` in ComfyUI's LTX-2.5 VAE file, on the CPU."""
    wrong = problem(path)
    if wrong is not None:
        raise RunFailed(f"the diffusion video VAE {path} cannot be read: {wrong}")
    config = diffusers_config(path)  # readable: `problem` said so
    cls: Any = module("diffusers").LTX2VideoDiffusionDecoderModel
    state = {k: v.to(dtype) for k, v in diffusers_state(load_safetensors(path)).items()}
    model = built_strictly(cls, config, state, f"the diffusion video VAE {path}")
    return model.to(dtype)
