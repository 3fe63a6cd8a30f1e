"""Qwen3 prompt encoder, as Z-Image conditions on it.

The prompt goes through the tokenizer's chat template (thinking enabled, generation prompt added)
and the second-to-last hidden state of the real tokens is the conditioning. diffusers pads prompts
to 512 tokens; the model is causal and padding sits after the prompt, so encoding the unpadded
tokens gives the same embeddings for much less work (truncation at 512 is kept).
"""

from __future__ import annotations

from typing import Any, cast

import torch
from torch import nn

from inline_core.components.diffusers_zimage.placement import OffloadSwap, PlacementLike
from inline_core.components.interfaces import Conditioning

MAX_SEQUENCE_LENGTH = 512


class QwenPromptEncoder:
    def __init__(
        self,
        tokenizer: Any,
        model: nn.Module,
        placement: PlacementLike,
        swap: OffloadSwap,
        max_sequence_length: int = MAX_SEQUENCE_LENGTH,
    ) -> None:
        self.tokenizer = tokenizer
        self.model = model
        self.placement = placement
        self.swap = swap
        self.max_sequence_length = max_sequence_length

    def template(self, prompt: str) -> str:
        messages = [{"role": "user", "content": prompt}]
        return cast(
            str,
            self.tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True, enable_thinking=True
            ),
        )

    def encode(self, prompt: str, /) -> Conditioning:
        batch = self.tokenizer(
            [self.template(prompt)],
            padding=False,
            max_length=self.max_sequence_length,
            truncation=True,
            return_tensors="pt",
        )
        device = torch.device(self.placement.device)
        input_ids = cast(torch.Tensor, batch.input_ids).to(device)
        mask = cast(torch.Tensor, batch.attention_mask).to(device).bool()
        with self.swap.use(self.model, self.placement), torch.inference_mode():
            out = self.model(input_ids=input_ids, attention_mask=mask, output_hidden_states=True)
            hidden = cast(tuple[torch.Tensor, ...], out.hidden_states)[-2]
            embeds = hidden[0][mask[0]]
        return Conditioning(value=embeds, tokens=int(embeds.shape[0]))
