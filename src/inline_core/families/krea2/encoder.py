"""Krea 2's prompt encoder over Qwen3-VL (torch), as `Krea2Pipeline` reads it: the prompt after a
fixed system prefix, padded to 512 tokens plus the prefix, the assistant suffix after the padding,
positions counting real tokens only; a stack of hidden states (the variant's layers) per token,
the prefix cut. Its mask (the prompt's tokens, then padding, then the suffix) goes with it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import torch
from torch import nn

from inline_core.components.interfaces import Conditioning
from inline_core.diffusion.encoders.memo import PromptMemo
from inline_core.diffusion.placement import OffloadSwap, PlacementLike
from inline_core.families.krea2.request import TEXT_TOKENS
from inline_core.families.krea2.variants import DEFAULT_TEXT_LAYERS

PREFIX = (
    "<|im_start|>system\nDescribe the image by detailing the color, shape, size, texture, "
    "quantity, text, spatial relationships of the objects and background:<|im_end|>\n"
    "<|im_start|>user\n"
)
SUFFIX = "<|im_end|>\n<|im_start|>assistant\n"
PREFIX_TOKENS = 34  # the prefix's length in Qwen's tokens, cut from the output
SUFFIX_TOKENS = 5


@dataclass(frozen=True)
class MaskedConditioning(Conditioning):
    mask: Any = None  # (TEXT_TOKENS,) bool: the tokens the transformer attends to


class Krea2PromptEncoder:
    def __init__(
        self,
        tokenizer: Any,
        model: nn.Module,
        placement: PlacementLike,
        swap: OffloadSwap,
        layers: tuple[int, ...] = DEFAULT_TEXT_LAYERS,
    ) -> None:
        self.tokenizer = tokenizer
        self.model = model
        self.placement = placement
        self.swap = swap
        self.layers = layers
        self.memo = PromptMemo()

    def encode(self, prompt: str, /) -> Conditioning:
        return self.encode_layers(prompt, self.layers)

    def encode_layers(self, prompt: str, layers: tuple[int, ...]) -> Conditioning:
        """The prompt as the hidden states of `layers` (a model's own, from its folder)."""
        return self.memo.encode(prompt, lambda p: self._encode(p, layers), ("krea-2", layers))

    def _encode(self, prompt: str, layers: tuple[int, ...]) -> Conditioning:
        device = torch.device(self.placement.device)
        text = self.tokenizer(
            [PREFIX + prompt],
            truncation=True,
            padding="max_length",
            max_length=TEXT_TOKENS + PREFIX_TOKENS - SUFFIX_TOKENS,
            return_tensors="pt",
        )
        suffix = self.tokenizer([SUFFIX], return_tensors="pt")
        ids = torch.cat([text.input_ids, suffix.input_ids], dim=1).to(device)
        mask = torch.cat([text.attention_mask, suffix.attention_mask], dim=1).bool().to(device)
        positions = (mask.long().cumsum(dim=-1) - 1).clamp(min=0).unsqueeze(0).expand(3, -1, -1)
        with self.swap.use(self.model, self.placement), torch.inference_mode():
            out = self.model(
                input_ids=ids,
                attention_mask=mask,
                position_ids=positions,
                output_hidden_states=True,
            )
            states = cast(tuple[torch.Tensor, ...], out.hidden_states)
            hidden = torch.stack([states[i] for i in layers], dim=2)[0, PREFIX_TOKENS:]
        kept = mask[0, PREFIX_TOKENS:]
        return MaskedConditioning(value=hidden, tokens=int(kept.sum()), mask=kept)
