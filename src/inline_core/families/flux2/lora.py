"""Reading a FLUX.2 LoRA file (torch side): diffusers' own FLUX.2 loader converts BFL's naming
(fused q/k/v split) and folds alphas in."""

from __future__ import annotations

from inline_core.diffusion.adapters.reader import diffusers_reader
from inline_core.families.flux2.lora_naming import FLUX2_LORAS

read_lora = diffusers_reader(FLUX2_LORAS, "Flux2KleinPipeline")
