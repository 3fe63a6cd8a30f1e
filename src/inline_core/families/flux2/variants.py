"""FLUX.2's variants, told from the files (torch-free): klein (no guidance embedder; 4B or 9B
from its width) or dev (a guidance embedder: guidance-distilled, read by a Mistral text encoder),
and klein's step-distilled models apart from its base ones.

diffusers' single-file loader calls every FLUX.2 file dev; here the transformer's shapes decide.
A diffusers folder says whether it is distilled in its `model_index.json` (`is_distilled`), as
`Flux2KleinPipeline` reads it; a single file says it in its name, as BFL and ComfyUI publish them
(`flux-2-klein-base-4b.safetensors` is the base model, `flux-2-klein-4b.safetensors` distilled).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from inline_core.contract.files import read_json
from inline_core.models.source import Source

BASE_NAME = re.compile(r"(^|[-_ ./])base([-_ ./]|$)", re.IGNORECASE)
# How a loaded klein transformer's config says it is step-distilled (model_index.json's name).
DISTILLED_MARK = "is_distilled"
EMBEDDED_DEFAULT = 3.5  # ComfyUI's FLUX guidance when no FluxGuidance sets it
# Widths of the published models (their hidden size: heads x head dim).
SIZES = {3072: "4B", 4096: "9B"}


@dataclass(frozen=True)
class Flux2Variant:
    klein: bool
    distilled: bool
    size: str  # "4B", "9B", or the width of another (e.g. a kit's tiny model)

    @property
    def title(self) -> str:
        if not self.klein:
            return "FLUX.2 dev"
        return f"FLUX.2 klein {self.size}" + ("" if self.distilled else " base")

    @property
    def guided(self) -> bool:
        """Whether guidance runs a negative prompt (klein's base models; distilled ones ignore
        it, and dev embeds it)."""
        return self.klein and not self.distilled

    @property
    def embedded_guidance(self) -> bool:
        """Whether guidance is an input of the transformer (dev's guidance embedder), one
        forward a step."""
        return not self.klein

    def request_fields(self) -> dict[str, bool]:
        """How its requests guide, as `Flux2Request` takes it."""
        return {"guided": self.guided, "embedded_guidance": self.embedded_guidance}

    def defaults(self) -> dict[str, Any]:
        """The model's own steps and guidance (BFL's: klein distilled 4 steps, klein base 50 at
        4, dev 50 at an embedded 4)."""
        if self.distilled:
            return {"steps": 4, "guidance": 1.0}
        return {"steps": 50, "guidance": 4.0}


def variant_of(config: Mapping[str, Any] | None, transformer: Source) -> Flux2Variant | None:
    """The variant of the transformer at `transformer` with `config` (None: unreadable)."""
    return _read_variant(config, lambda: distilled(transformer))


def loaded_variant(config: Mapping[str, Any]) -> Flux2Variant | None:
    """The variant of a loaded transformer: its config, where its loader marked a klein's
    `is_distilled` from its files (`build.py`)."""
    return _read_variant(config, lambda: bool(config.get(DISTILLED_MARK, False)))


def _read_variant(
    config: Mapping[str, Any] | None, is_distilled: Callable[[], bool]
) -> Flux2Variant | None:
    if config is None:
        return None
    heads, head_dim = config.get("num_attention_heads"), config.get("attention_head_dim")
    if not isinstance(heads, int) or not isinstance(head_dim, int):
        return None
    width = heads * head_dim
    size = SIZES.get(width, f"{width}-wide")
    klein = not bool(config.get("guidance_embeds", True))
    return Flux2Variant(klein, klein and is_distilled(), size)


def distilled(transformer: Source) -> bool:
    """Whether a klein transformer is step-distilled: its folder's `is_distilled`, or its file's
    name (a `base` model is not)."""
    if transformer.subfolder:
        index = read_json(transformer.path / "model_index.json") or {}
        return bool(index.get("is_distilled", False))
    return BASE_NAME.search(transformer.path.stem) is None
