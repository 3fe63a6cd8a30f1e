"""A prompt encoder over a causal language model's hidden states, through its chat template.

The prompt goes through the tokenizer's chat template (with the family's template options, e.g.
thinking enabled, generation prompt added) and one hidden state of the real tokens (the family's
layer, e.g. the second to last) is the conditioning. diffusers pads prompts to a fixed length; the
model is causal and padding sits after the prompt, so encoding the unpadded tokens gives the same
embeddings for much less work (truncation at the maximum length is kept).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import torch
from torch import nn

from inline_core.components.interfaces import Conditioning
from inline_core.diffusion.encoders.memo import PromptMemo
from inline_core.diffusion.placement import OffloadSwap, PlacementLike


class ChatPromptEncoder:
    def __init__(
        self,
        tokenizer: Any,
        model: nn.Module,
        placement: PlacementLike,
        swap: OffloadSwap,
        *,
        max_sequence_length: int,
        hidden_layer: int = -2,
        template_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.model = model
        self.placement = placement
        self.swap = swap
        self.max_sequence_length = max_sequence_length
        self.memo = PromptMemo()  # an unchanged prompt is not encoded again
        self.hidden_layer = hidden_layer
        self.template_options = dict(template_options or {})

    def template(self, prompt: str) -> str:
        messages = [{"role": "user", "content": prompt}]
        return cast(
            str,
            self.tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True, **self.template_options
            ),
        )

    def encode(self, prompt: str, /) -> Conditioning:
        return self.memo.encode(prompt, self._encode)

    def _encode(self, prompt: str) -> Conditioning:
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
            hidden = cast(tuple[torch.Tensor, ...], out.hidden_states)[self.hidden_layer]
            embeds = hidden[0][mask[0]]
        return Conditioning(value=embeds, tokens=int(embeds.shape[0]))
