"""Reading a Qwen-Image LoRA file (torch side): diffusers' own Qwen-Image loader converts the
ComfyUI, kohya and Lightning namings (and folds their alphas in)."""

from __future__ import annotations

from inline_core.diffusion.adapters.reader import diffusers_reader
from inline_core.families.qwen_image.lora_naming import QWEN_IMAGE_LORAS

read_lora = diffusers_reader(QWEN_IMAGE_LORAS, "QwenImagePipeline")
