"""The latent upsampler loaded (torch): a diffusers folder with `from_pretrained`, or
Lightricks' single file built from its header's config (`upsampler_file.py`) and loaded
strictly, so a file read wrong is an error naming the keys, never a blurred render."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import torch
from torch import nn

from inline_core.diffusion.libs import load_safetensors, module
from inline_core.errors import RunFailed
from inline_core.families.ltx2.strict_load import built_strictly
from inline_core.families.ltx2.upsampler_file import UpsamplerFileError, diffusers_config


def load_upsampler(path: Path, dtype: torch.dtype) -> nn.Module:
    """The `LTX2LatentUpsamplerModel` at `path` (a folder or a file), on the CPU, in `dtype`."""
    cls: Any = module("diffusers.pipelines.ltx2.latent_upsampler").LTX2LatentUpsamplerModel
    if path.is_dir():
        return cast(nn.Module, cls.from_pretrained(str(path), local_files_only=True, dtype=dtype))
    try:
        config = diffusers_config(path)
    except UpsamplerFileError as exc:
        raise RunFailed(f"the latent upsampler {path} cannot be read: {exc}") from exc
    state = {k: v.to(dtype) for k, v in load_safetensors(path).items()}
    model = built_strictly(cls, config, state, f"the latent upsampler {path}")
    return model.to(dtype)
