"""Z-Image's control model format: the Z-Image Fun ControlNet Union files, recognised from a single
file's header and configured from its shapes (torch-free).

The files alibaba-pai distributes (`Z-Image-Turbo-Fun-Controlnet-Union*.safetensors`, which
ComfyUI's `ModelPatchLoader` reads from `model_patches/`) already use the key names of diffusers'
`ZImageControlNetModel`; diffusers' single-file converter only drops the refiner blocks of a 2.0
file. A file carries no config, so it is read from the shapes:

- `control_all_x_embedder.2-1.weight` gives the width and the control input's channels (16: the
  1.0 union, latents only; 33 in 2.x: latents, the inpaint mask and the masked image's latents);
- the control blocks sit evenly over the transformer's layers (1.0: 6 of 30, every 5th; 2.x: 15,
  every 2nd), so their places need the transformer's depth;
- 2.x also feeds the noise refiner: a file whose refiner blocks have a non-zero `before_proj` is
  2.1 (`control_noise_refiner`), otherwise 2.0 (`control_layers`); 1.0 has plain refiner blocks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from inline_core.diffusion.files.shapes import (
    ConfigInferenceError,
    Shapes,
    count_blocks,
    shape_of,
)

CLASS_NAME = "ZImageControlNetModel"
CATEGORY = "controlnet"
MARKER = "control_all_x_embedder.2-1.weight"
EXPECTED = (
    "a Z-Image Fun ControlNet Union file (control_all_x_embedder.2-1.weight and control_layers.*, "
    "as alibaba-pai distributes it) or a diffusers ZImageControlNetModel folder"
)
# Z-Image Turbo's depth: the control blocks' places are spread over it.
TURBO_LAYERS = 30
PATCH_CELLS = 4  # a 2x2 patch of latent cells per token


@dataclass(frozen=True)
class ControlUse:
    """The control model a request uses and how strongly (what crosses the job wire)."""

    name: str  # its catalog name in controlnet/
    path: str
    identity: str  # changes when the file does: the resident cache's key
    strength: float  # diffusers' `controlnet_conditioning_scale`


def is_zimage_control(shapes: Shapes) -> bool:
    return MARKER in shapes and "control_layers.0.after_proj.weight" in shapes


def control_in_dim(shapes: Shapes) -> int:
    """Channels of the control input the file takes (its patch embedder's inputs / 4)."""
    return shape_of(shapes, MARKER)[1] // PATCH_CELLS


def width(shapes: Shapes) -> int:
    return shape_of(shapes, MARKER)[0]


def refiner_mode(shapes: Shapes, before_proj_zero: bool | None = None) -> str | None:
    """diffusers' `add_control_noise_refiner` for the file: None (1.0), "control_layers" (2.0) or
    "control_noise_refiner" (2.1). `before_proj_zero`: whether the refiner's first `before_proj`
    holds only zeros (read from the weights; None: not read, only the shapes decide)."""
    if "control_noise_refiner.0.after_proj.weight" not in shapes:
        plain_refiner = "control_noise_refiner.0.attention_norm1.weight" in shapes
        return None if plain_refiner else "control_layers"
    if "control_noise_refiner.0.before_proj.weight" not in shapes or before_proj_zero:
        return "control_layers"
    return "control_noise_refiner"


def infer_config(
    shapes: Shapes, n_layers: int = TURBO_LAYERS, before_proj_zero: bool | None = None
) -> dict[str, Any]:
    """A `ZImageControlNetModel` config for the file, placed over a transformer of `n_layers`."""
    if not is_zimage_control(shapes):
        raise ConfigInferenceError(f"not {EXPECTED}")
    dim = width(shapes)
    head_dim = shape_of(shapes, "control_layers.0.attention.norm_q.weight")[0]
    if head_dim <= 0 or dim % head_dim:
        raise ConfigInferenceError(f"head dim {head_dim} does not divide the width {dim}")
    count = count_blocks(shapes, r"control_layers\.(\d+)\.")
    if count == 0 or n_layers % count:
        raise ConfigInferenceError(
            f"{count} control blocks do not spread evenly over a transformer of {n_layers} layers"
        )
    stride = n_layers // count
    mode = refiner_mode(shapes, before_proj_zero)
    n_refiner = count_blocks(shapes, r"control_noise_refiner\.(\d+)\.") or 2
    return {
        "control_layers_places": [i * stride for i in range(count)],
        "control_refiner_layers_places": list(range(n_refiner)),
        "control_in_dim": control_in_dim(shapes),
        "add_control_noise_refiner": mode,
        "all_patch_size": [2],
        "all_f_patch_size": [1],
        "dim": dim,
        "n_refiner_layers": n_refiner,
        "n_heads": dim // head_dim,
        "n_kv_heads": dim // head_dim,
        "norm_eps": 1e-5,
        "qk_norm": True,
    }


def mismatch(config: Mapping[str, Any], transformer: Mapping[str, Any]) -> str | None:
    """Why a control model's config cannot drive a transformer's (None: it can)."""
    dim, t_dim = config.get("dim"), transformer.get("dim")
    if dim != t_dim:
        return f"its width is {dim}, the diffusion model's is {t_dim}"
    channels = transformer.get("in_channels")
    in_dim = config.get("control_in_dim")
    if not isinstance(in_dim, int) or not isinstance(channels, int) or in_dim < channels:
        return f"it takes {in_dim} control channels, fewer than the model's {channels} latents"
    return None


def takes_inpaint(config: Mapping[str, Any], latent_channels: int) -> bool:
    """Whether the control input has room for the inpaint mask and masked image (2.x)."""
    return int(config.get("control_in_dim") or 0) >= 2 * latent_channels + 1


def no_inpaint(name: str) -> str:
    """Why a 1.x file is refused a mask or an image to inpaint (at submit; at run, a file
    replaced since)."""
    return (
        f"controlnet/{name} takes no inpaint mask or image to inpaint (a 1.x layout: control "
        "latents only): remove them (ComfyUI ignores them with this model), or pick a 2.x Z-Image "
        "Fun ControlNet Union file, which inpaints"
    )
