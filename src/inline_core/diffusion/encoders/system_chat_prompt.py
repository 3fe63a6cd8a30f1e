"""A chat prompt encoder whose conversation opens with a system message, tokenized by the chat
template itself (FLUX.2 dev's Mistral: BFL's system message, then the prompt, no generation
prompt).

The messages take diffusers' shape (each content a list of text parts), and the tokenizer's own
`apply_chat_template` tokenizes them as diffusers' pipeline does: the template writes the BOS
itself, so no special token is added again, and the padding side is the tokenizer's.
"""

from __future__ import annotations

from typing import Any, cast

import torch
from torch import nn

from inline_core.diffusion.encoders.chat_prompt import ChatPromptEncoder
from inline_core.diffusion.placement import OffloadSwap, PlacementLike

IMAGE_TOKEN = "[IMG]"  # dropped from prompts, as diffusers does (it stands for an image there)


def messages(system: str, prompt: str) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": [{"type": "text", "text": system}]},
        {"role": "user", "content": [{"type": "text", "text": prompt.replace(IMAGE_TOKEN, "")}]},
    ]


class SystemChatPromptEncoder(ChatPromptEncoder):
    def __init__(
        self,
        tokenizer: Any,
        model: nn.Module,
        placement: PlacementLike,
        swap: OffloadSwap,
        *,
        system: str,
        max_sequence_length: int,
        hidden_layers: tuple[int, ...],
    ) -> None:
        super().__init__(
            tokenizer,
            model,
            placement,
            swap,
            max_sequence_length=max_sequence_length,
            hidden_layers=hidden_layers,
            padded=True,
            # The system message is part of how the model is read: prompts are kept under it.
            template_options={"system": system},
        )
        self.system = system

    def template(self, prompt: str) -> str:
        return cast(
            str,
            self.tokenizer.apply_chat_template(
                messages(self.system, prompt), tokenize=False, add_generation_prompt=False
            ),
        )

    def tokens(self, prompt: str) -> tuple[torch.Tensor, torch.Tensor]:
        batch = self.tokenizer.apply_chat_template(
            [messages(self.system, prompt)],
            add_generation_prompt=False,
            tokenize=True,
            return_dict=True,
            return_tensors="pt",
            padding="max_length",
            truncation=True,
            max_length=self.max_sequence_length,
        )
        return cast(torch.Tensor, batch["input_ids"]), cast(torch.Tensor, batch["attention_mask"])
