"""Reading a family's LoRA file (torch side) through diffusers' own loader for that family: its
`lora_state_dict` converts the non-diffusers namings (kohya, ComfyUI, ai-toolkit, musubi-tuner)
and folds their alphas in; a diffusers/PEFT file's `lora_alpha` comes from its adapter metadata.
A family supplies only its namings and the diffusers pipeline whose loader reads them."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import torch

from inline_core.diffusion.adapters.bank import Reader
from inline_core.diffusion.adapters.naming import LoraNamings, read_layout
from inline_core.diffusion.adapters.weights import LoraWeights, from_state_dict
from inline_core.diffusion.files.header import read_header
from inline_core.diffusion.libs import diffusers
from inline_core.errors import InvalidRequest

PREFIX = "transformer."


def diffusers_reader(namings: LoraNamings, pipeline: str) -> Reader:
    """A reader of `namings`' files, converted by `diffusers.<pipeline>.lora_state_dict`."""

    def read(name: str, path: str, device: torch.device, dtype: torch.dtype) -> LoraWeights:
        read_layout(name, read_header(Path(path)), namings)  # refuse another model's file first
        loader: Any = getattr(diffusers(), pipeline)
        try:
            state, metadata = loader.lora_state_dict(path, return_lora_metadata=True)
        except (ValueError, KeyError) as exc:
            why = str(exc) or type(exc).__name__
            raise InvalidRequest(
                f"loras/{name} cannot be converted for {namings.model}: {why}"
            ) from exc
        return from_state_dict(
            name,
            cast(dict[str, torch.Tensor], state),
            prefix=PREFIX,
            alpha=_alpha(cast(dict[str, Any] | None, metadata)),
            device=device,
            dtype=dtype,
        )

    return read


def _alpha(metadata: dict[str, Any] | None) -> float | None:
    """PEFT's `lora_alpha` for the transformer, where the file's adapter metadata holds one."""
    if not metadata:
        return None
    value = metadata.get(f"{PREFIX}lora_alpha", metadata.get("lora_alpha"))
    return float(value) if isinstance(value, int | float) else None
