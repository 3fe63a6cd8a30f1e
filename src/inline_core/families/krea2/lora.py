"""Reading a Krea 2 LoRA file (torch side): diffusers' own Krea 2 loader converts Krea's and
ai-toolkit's naming."""

from __future__ import annotations

from inline_core.diffusion.adapters.reader import diffusers_reader
from inline_core.families.krea2.lora_naming import KREA2_LORAS

read_lora = diffusers_reader(KREA2_LORAS, "Krea2Pipeline")
