"""The tiny kit's control models, matched to its transformer and written into `controlnet/` as
alibaba-pai distributes them (one safetensors file in `ZImageControlNetModel`'s key names):

- `<name>_control_union.safetensors`: the 1.0 layout (latents only, plain refiner blocks);
- `<name>_control_union_2.1.safetensors`: the 2.1 layout (latents, inpaint mask and masked image;
  control blocks on the noise refiner too);
- `<name>_control_union_diffusers/`: the 1.0 model as a diffusers folder.

A trained model's `before_proj`/`after_proj` start at zero; here they are random, so a control
image visibly changes the picture and the parity tests compare something. The 2.1 model's patch
embedder weighs the inpaint channels up, so a mask visibly changes its picture too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import torch
from torch import nn

from inline_core.diffusion.kit import save_weights, seeded
from inline_core.diffusion.libs import diffusers

SEEDS = {"union": 4, "union-2.1": 5}
PROJECTION_STD = 0.05
INPAINT_WEIGHT = 16.0
LATENT_CHANNELS = 16


def control_config(transformer: nn.Module, kind: str) -> dict[str, Any]:
    config: Any = getattr(transformer, "config")  # noqa: B009 (diffusers' config attribute)
    layers = int(config.n_layers)
    inpaint = kind == "union-2.1"
    return {
        "control_layers_places": list(range(layers)),
        "control_refiner_layers_places": list(range(int(config.n_refiner_layers))),
        "control_in_dim": 2 * LATENT_CHANNELS + 1 if inpaint else LATENT_CHANNELS,
        "add_control_noise_refiner": "control_noise_refiner" if inpaint else None,
        "all_patch_size": [2],
        "all_f_patch_size": [1],
        "dim": int(config.dim),
        "n_refiner_layers": int(config.n_refiner_layers),
        "n_heads": int(config.n_heads),
        "n_kv_heads": int(config.n_kv_heads),
        "norm_eps": 1e-5,
        "qk_norm": True,
    }


def build_control(transformer: nn.Module, kind: str) -> nn.Module:
    seeded(SEEDS[kind])
    model: nn.Module = diffusers().ZImageControlNetModel(**control_config(transformer, kind))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "before_proj" in name or "after_proj" in name:
                p.normal_(0.0, PROJECTION_STD)
        embedder = model.get_submodule("control_all_x_embedder.2-1")
        weight = cast(torch.Tensor, embedder.weight)
        in_dim = int(getattr(model, "config").control_in_dim)  # noqa: B009
        # Columns are (patch cell, channel) with the channel fastest: past the latents' own
        # channels are the mask and the masked image.
        inpaint = torch.arange(weight.shape[1]) % in_dim >= LATENT_CHANNELS
        weight[:, inpaint] *= INPAINT_WEIGHT
    return model.eval()


def write_kit_controls(out: Path, name: str, transformer: nn.Module) -> dict[str, Path]:
    folder = out / "controlnet"
    union = build_control(transformer, "union")
    union_21 = build_control(transformer, "union-2.1")
    paths = {
        "union": save_weights(
            union.state_dict(), folder / f"{name}_control_union.safetensors", torch.float32
        ),
        "union-2.1": save_weights(
            union_21.state_dict(), folder / f"{name}_control_union_2.1.safetensors", torch.float32
        ),
    }
    diffusers_dir = folder / f"{name}_control_union_diffusers"
    getattr(union, "save_pretrained")(str(diffusers_dir))  # noqa: B009 (diffusers' ModelMixin)
    paths["union-diffusers"] = diffusers_dir
    return paths
