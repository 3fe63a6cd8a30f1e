"""T5 as Chroma conditions on it: the prompt padded to 512 tokens, encoded with its attention mask
(torch). The mask the transformer sees keeps every real token and the first padding one."""

from __future__ import annotations

from typing import Any, cast

import torch
from torch import nn

from inline_core.components.interfaces import Conditioning
from inline_core.diffusion.placement import OffloadSwap, PlacementLike

MAX_TOKENS = 512


class MaskedT5Encoder:
    def __init__(
        self, tokenizer: Any, model: nn.Module, placement: PlacementLike, swap: OffloadSwap
    ) -> None:
        self.tokenizer = tokenizer
        self.model = model
        self.placement = placement
        self.swap = swap

    def encode(self, prompt: str, /) -> Conditioning:
        batch = self.tokenizer(
            [prompt],
            padding="max_length",
            max_length=MAX_TOKENS,
            truncation=True,
            return_length=False,
            return_overflowing_tokens=False,
            return_tensors="pt",
        )
        device = torch.device(self.placement.device)
        ids = cast(torch.Tensor, batch.input_ids).to(device)
        mask = cast(torch.Tensor, batch.attention_mask).to(device)
        with self.swap.use(self.model, self.placement), torch.inference_mode():
            embeds = cast(
                torch.Tensor, self.model(ids, output_hidden_states=False, attention_mask=mask)[0]
            )
        return Conditioning(value=embeds[0], tokens=int(mask.sum()))


def transformer_mask(tokens: int, length: int, dtype: torch.dtype) -> torch.Tensor:
    """(length,) ones over the real tokens and the first padding one, as Chroma masks them."""
    return (torch.arange(length) <= tokens).to(dtype)
