"""Reading a Wan LoRA file (torch side): diffusers' own Wan loader converts the ComfyUI,
ai-toolkit and musubi-tuner namings (and folds their alphas in)."""

from __future__ import annotations

from inline_core.diffusion.adapters.reader import diffusers_reader
from inline_core.families.wan.lora_naming import WAN_LORAS

read_lora = diffusers_reader(WAN_LORAS, "WanPipeline")
