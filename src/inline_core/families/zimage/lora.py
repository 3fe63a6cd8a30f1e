"""Reading a Z-Image LoRA file (torch side): diffusers' own Z-Image loader converts the kohya,
ComfyUI and ai-toolkit namings (and folds their alphas in); a diffusers/PEFT file's `lora_alpha`
comes from its adapter metadata."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import torch

from inline_core.diffusion.adapters.naming import read_layout
from inline_core.diffusion.adapters.weights import LoraWeights, from_state_dict
from inline_core.diffusion.files.header import read_header
from inline_core.diffusion.libs import diffusers
from inline_core.errors import InvalidRequest
from inline_core.families.zimage.lora_naming import ZIMAGE_LORAS

PREFIX = "transformer."


def read_lora(name: str, path: str, device: torch.device, dtype: torch.dtype) -> LoraWeights:
    read_layout(name, read_header(Path(path)), ZIMAGE_LORAS)  # refuse another model's file first
    loader: Any = diffusers().ZImagePipeline
    try:
        state, metadata = loader.lora_state_dict(path, return_lora_metadata=True)
    except (ValueError, KeyError) as exc:
        raise InvalidRequest(f"loras/{name} cannot be converted for Z-Image: {exc}") from exc
    alpha = _alpha(cast(dict[str, Any] | None, metadata))
    return from_state_dict(
        name,
        cast(dict[str, torch.Tensor], state),
        prefix=PREFIX,
        alpha=alpha,
        device=device,
        dtype=dtype,
    )


def _alpha(metadata: dict[str, Any] | None) -> float | None:
    """PEFT's `lora_alpha` for the transformer, where the file's adapter metadata holds one."""
    if not metadata:
        return None
    value = metadata.get(f"{PREFIX}lora_alpha", metadata.get("lora_alpha"))
    return float(value) if isinstance(value, int | float) else None
