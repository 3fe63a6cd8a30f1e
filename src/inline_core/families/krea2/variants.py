"""Krea 2's variants, told from the files (torch-free): the base model and Turbo (few-step
distilled: 8 steps, no guidance, a fixed shift). A diffusers folder says which in its
`model_index.json` (`is_distilled`, as `Krea2Pipeline` reads it), and which Qwen3-VL layers its
model reads (`text_encoder_select_layers`); a single file says which by its name, and reads the
published taps (every third layer from 2, as many as its transformer takes: ComfyUI's)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, cast

from inline_core.contract.files import read_json
from inline_core.models.source import Source

TURBO_NAME = re.compile(r"turbo|distill", re.IGNORECASE)
# `Krea2Pipeline`'s default hidden states of its Qwen3-VL (every third layer of 36, from 2).
DEFAULT_TEXT_LAYERS = tuple(range(2, 36, 3))


@dataclass(frozen=True)
class Krea2Variant:
    distilled: bool
    text_layers: tuple[int, ...]

    @property
    def title(self) -> str:
        return "Krea 2 Turbo" if self.distilled else "Krea 2"

    def defaults(self) -> dict[str, Any]:
        """The model's own steps and guidance (Krea's: Turbo 8 steps unguided, base 28 at 4.5)."""
        if self.distilled:
            return {"steps": 8, "guidance": 0.0}
        return {"steps": 28, "guidance": 4.5}


def published_taps(count: int) -> tuple[int, ...]:
    """The hidden states a model taking `count` of them reads: (2, 5, ..., 35) for 12."""
    return tuple(2 + 3 * i for i in range(count))


def variant_of(transformer: Source, text_layers: int | None = None) -> Krea2Variant:
    """The variant at `transformer`; `text_layers` is how many hidden states its transformer
    takes (its config's `num_text_layers`; None: the published 12)."""
    if transformer.subfolder:
        index = read_json(transformer.path / "model_index.json") or {}
        layers = index.get("text_encoder_select_layers")
        listed = cast(list[object], layers) if isinstance(layers, list) else None
        chosen = tuple(int(str(i)) for i in listed) if listed is not None else DEFAULT_TEXT_LAYERS
        return Krea2Variant(bool(index.get("is_distilled", False)), chosen)
    taps = DEFAULT_TEXT_LAYERS if text_layers is None else published_taps(text_layers)
    return Krea2Variant(TURBO_NAME.search(transformer.path.name) is not None, taps)
