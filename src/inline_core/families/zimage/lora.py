"""Reading a Z-Image LoRA file (torch side): diffusers' own Z-Image loader converts the kohya,
ComfyUI and ai-toolkit namings (and folds their alphas in)."""

from __future__ import annotations

from inline_core.diffusion.adapters.reader import diffusers_reader
from inline_core.families.zimage.lora_naming import ZIMAGE_LORAS

read_lora = diffusers_reader(ZIMAGE_LORAS, "ZImagePipeline")
