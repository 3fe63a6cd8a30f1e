"""A prompt encoder over a T5-style encoder (T5, UMT5), as diffusers' UMT5-conditioned video
pipelines read it.

The prompt is cleaned (HTML entities, whitespace, and ftfy's fixes where it is installed, as
diffusers does), tokenized to a fixed length with its attention mask, encoded, and the states of
the real tokens are kept, padded back with zeros to that length: every prompt's conditioning has
one shape, so prompts of any length share a batched forward. The padded length is encoded as
diffusers encodes it (not the real tokens alone), so the numbers match its pipelines exactly.
"""

from __future__ import annotations

import html
import importlib
import importlib.util
import re
from typing import Any, cast

import torch
from torch import nn

from inline_core.components.interfaces import Conditioning
from inline_core.diffusion.encoders.memo import PromptMemo
from inline_core.diffusion.placement import OffloadSwap, PlacementLike


def clean_prompt(text: str) -> str:
    """diffusers' `prompt_clean`: ftfy (when installed), HTML entities twice, whitespace."""
    if importlib.util.find_spec("ftfy") is not None:
        text = cast(Any, importlib.import_module("ftfy")).fix_text(text)
    text = html.unescape(html.unescape(text)).strip()
    return re.sub(r"\s+", " ", text).strip()


class PaddedT5Encoder:
    def __init__(
        self,
        tokenizer: Any,
        model: nn.Module,
        placement: PlacementLike,
        swap: OffloadSwap,
        *,
        max_sequence_length: int,
    ) -> None:
        self.tokenizer = tokenizer
        self.model = model
        self.placement = placement
        self.swap = swap
        self.max_sequence_length = max_sequence_length
        self.memo = PromptMemo()  # an unchanged prompt is not encoded again

    def encode(self, prompt: str, /) -> Conditioning:
        return self.memo.encode(prompt, self._encode)

    def _encode(self, prompt: str) -> Conditioning:
        batch = self.tokenizer(
            [clean_prompt(prompt)],
            padding="max_length",
            max_length=self.max_sequence_length,
            truncation=True,
            add_special_tokens=True,
            return_attention_mask=True,
            return_tensors="pt",
        )
        device = torch.device(self.placement.device)
        ids = cast(torch.Tensor, batch.input_ids).to(device)
        mask = cast(torch.Tensor, batch.attention_mask).to(device)
        length = int(mask.gt(0).sum())
        with self.swap.use(self.model, self.placement), torch.inference_mode():
            hidden = cast(torch.Tensor, self.model(ids, mask).last_hidden_state)[0]
            padding = hidden.new_zeros(hidden.shape[0] - length, hidden.shape[1])
            embeds = torch.cat([hidden[:length], padding])
        return Conditioning(value=embeds, tokens=length)
