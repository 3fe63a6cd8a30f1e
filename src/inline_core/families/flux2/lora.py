"""Reading a FLUX.2 LoRA file (torch side): diffusers' own FLUX.2 loader converts BFL's naming
(fused q/k/v split) and folds alphas in.

One layer it leaves in BFL's order: the output layer's modulation (`final_layer.adaLN_modulation
.1`) yields (shift, scale) in BFL's model, as ComfyUI runs it, and (scale, shift) in diffusers'
`norm_out.linear`. diffusers' converter swaps the two halves for the weights but not for a LoRA's
up matrix, so a BFL-named file's pair is swapped here: it renders as ComfyUI renders it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from inline_core.diffusion.adapters.naming import read_layout
from inline_core.diffusion.adapters.reader import diffusers_reader
from inline_core.diffusion.adapters.weights import LoraWeights, LowRank
from inline_core.diffusion.files.header import read_header
from inline_core.families.flux2.lora_naming import BFL_NAMING, FLUX2_LORAS

OUTPUT_MODULATION = "norm_out.linear"
_read_converted = diffusers_reader(FLUX2_LORAS, "Flux2KleinPipeline")


def read_lora(name: str, path: str, device: torch.device, dtype: torch.dtype) -> LoraWeights:
    weights = _read_converted(name, path, device, dtype)
    pair = weights.layers.get(OUTPUT_MODULATION)
    if pair is None or read_layout(name, read_header(Path(path)), FLUX2_LORAS).naming != BFL_NAMING:
        return weights
    shift, scale = pair.up_t.chunk(2, dim=1)
    swapped = LowRank(pair.down_t, torch.cat([scale, shift], dim=1).contiguous())
    return replace(weights, layers={**weights.layers, OUTPUT_MODULATION: swapped})
