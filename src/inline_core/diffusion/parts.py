"""How a family's parts load: one weight format per part, a scheduler default, a tokenizer.

Most families' stacks are the same kinds of part (a denoiser, text encoders, a VAE read through a
`ModelFormat`; a tokenizer; a scheduler config with a published default), so a builder's `load`
is this table (`contract/builder.py`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from inline_core.device.policy import Placement
from inline_core.diffusion.formats.format import ModelFormat
from inline_core.diffusion.loading import load_component, load_scheduler_config, load_tokenizer
from inline_core.models.source import Source


@dataclass(frozen=True)
class PartLoader:
    family: str  # the family's title, for errors
    formats: Mapping[str, ModelFormat]  # weight part -> its format
    scheduler_default: Mapping[str, Any]  # used when a stack brings no scheduler config
    chat_template: bool = False  # the tokenizer must carry a chat template

    def load(self, part: str, source: Source | None, placement: Placement | None) -> Any:
        if part == "scheduler":
            return load_scheduler_config(source, self.scheduler_default)
        if source is None:
            raise ValueError(f"the {self.family} {part} has no default")
        if part == "tokenizer":
            return load_tokenizer(source, chat_template=self.chat_template)
        fmt = self.formats.get(part)
        if fmt is None or placement is None:
            raise ValueError(f"{self.family} has no part {part!r}")
        return load_component(fmt, source, placement)
