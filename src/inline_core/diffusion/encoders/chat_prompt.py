"""A prompt encoder over a causal language model's hidden states, through its chat template.

The prompt goes through the tokenizer's chat template (with the family's template options, e.g.
thinking enabled, generation prompt added) and the family's hidden states are the conditioning.
Families read the same model differently (Z-Image: the second to last layer of the real tokens;
FLUX.2 klein: three layers side by side over the prompt padded to 512 tokens), so one text
encoder file loaded once serves both: a `Reading` says which, and the prompts it keeps are keyed
on it, so a prompt encoded one way is never handed out for the other.

diffusers pads prompts to a fixed length. Unpadded (`padded=False`): the model is causal and the
padding sits after the prompt, so encoding the real tokens alone gives the same embeddings for
much less work, and the conditioning is those tokens. Padded: the transformer attends to the
padding's states too, so they are encoded as diffusers encodes them and kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import torch
from torch import nn

from inline_core.components.interfaces import Conditioning
from inline_core.diffusion.encoders.memo import PromptMemo
from inline_core.diffusion.placement import OffloadSwap, PlacementLike


@dataclass(frozen=True)
class Reading:
    """How a family reads the model: which hidden states (concatenated along the features, in
    order), whether the prompt is padded to `max_sequence_length`, and the template's options."""

    max_sequence_length: int
    hidden_layers: tuple[int, ...] = (-2,)
    padded: bool = False
    template_options: tuple[tuple[str, Any], ...] = field(default=())

    @staticmethod
    def options(values: Mapping[str, Any] | None) -> tuple[tuple[str, Any], ...]:
        return tuple(sorted((values or {}).items()))


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
        hidden_layers: tuple[int, ...] | None = None,
        padded: bool = False,
    ) -> None:
        self.tokenizer = tokenizer
        self.model = model
        self.placement = placement
        self.swap = swap
        self.reading = Reading(
            max_sequence_length,
            hidden_layers or (hidden_layer,),
            padded,
            Reading.options(template_options),
        )
        self.memo = PromptMemo()  # an unchanged prompt is not encoded again

    @property
    def max_sequence_length(self) -> int:
        return self.reading.max_sequence_length

    def template(self, prompt: str) -> str:
        messages = [{"role": "user", "content": prompt}]
        return cast(
            str,
            self.tokenizer.apply_chat_template(
                messages,
                tokenize=False,
                add_generation_prompt=True,
                **dict(self.reading.template_options),
            ),
        )

    def encode(self, prompt: str, /) -> Conditioning:
        return self.memo.encode(prompt, self._encode, self.reading)

    def tokens(self, prompt: str) -> tuple[torch.Tensor, torch.Tensor]:
        """The prompt's (1, tokens) input ids and attention mask, through the template."""
        reading = self.reading
        batch = self.tokenizer(
            [self.template(prompt)],
            padding="max_length" if reading.padded else False,
            max_length=reading.max_sequence_length,
            truncation=True,
            return_tensors="pt",
        )
        return cast(torch.Tensor, batch.input_ids), cast(torch.Tensor, batch.attention_mask)

    def _encode(self, prompt: str) -> Conditioning:
        reading = self.reading
        device = torch.device(self.placement.device)
        ids, attention = self.tokens(prompt)
        input_ids, mask = ids.to(device), attention.to(device)
        with self.swap.use(self.model, self.placement), torch.inference_mode():
            out = self.model(
                input_ids=input_ids,
                attention_mask=mask if reading.padded else mask.bool(),
                output_hidden_states=True,
                use_cache=False,
            )
            states = cast(tuple[torch.Tensor, ...], out.hidden_states)
            hidden = torch.cat([states[i][0] for i in reading.hidden_layers], dim=-1)
            embeds = hidden if reading.padded else hidden[mask[0].bool()]
        return Conditioning(value=embeds, tokens=int(mask.sum()))
