"""Reading an LTX-2 LoRA file (torch side): diffusers' own LTX-2 loader converts Lightricks'
naming (ComfyUI's) and folds its alphas in."""

from __future__ import annotations

from inline_core.diffusion.adapters.reader import diffusers_reader
from inline_core.families.ltx2.lora_naming import LTX2_LORAS

read_lora = diffusers_reader(LTX2_LORAS, "LTX2Pipeline")
