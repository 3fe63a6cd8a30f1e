"""LTX-2's LoRA namings: which trainers' files it takes and which of its layers they may adapt
(torch-free; the weights are converted by diffusers' own LTX-2 converter when they load).

- diffusers/PEFT: `transformer.transformer_blocks.0.attn1.to_q.lora_A.weight`;
- Lightricks' own naming as ComfyUI, LTX-2's trainer and its official LoRAs (the distilled one,
  IC-LoRAs) write it: `diffusion_model.transformer_blocks.0.attn1.to_q.lora_A.weight` (the blocks'
  names are diffusers' own; `_convert_non_diffusers_ltx2_lora_to_diffusers` renames the rest).

The layers are the blocks' attention (video, audio and the two cross-modal ones) and
feed-forward projections: each sees one row per request in a batched forward, so each row gets
its own stack. A file's other layers (the embedders, the text connectors) are refused by name.
"""

from __future__ import annotations

import re

from inline_core.diffusion.adapters.naming import LoraNamings, Naming

TARGET = re.compile(
    r"^transformer_blocks\.\d+\.(?:"
    r"(?:attn1|attn2|audio_attn1|audio_attn2|audio_to_video_attn|video_to_audio_attn)"
    r"\.(?:to_q|to_k|to_v|to_out\.0)"
    r"|(?:ff|audio_ff)\.net\.(?:0\.proj|2))$"
)


def _module(layer: str) -> str | None:
    return layer if TARGET.match(layer) else None


LTX2_LORAS = LoraNamings(
    "LTX-2",
    (
        Naming("diffusers/PEFT", "transformer.", _module),
        Naming("Lightricks/ComfyUI", "diffusion_model.", _module),
    ),
)
