"""A text encoder part's score where the encoder must be as wide as the transformer's text input
(torch-free; runs at submit).

Wan's UMT5, Qwen-Image's Qwen2.5-VL, Krea 2's Qwen3-VL and Z-Image's Qwen3 are found alike: an HF
folder by its config's `model_type`, a single file by its header, its width from either, and a
transformer already found wanting another width rules it out. Each family states its encoder's
format, the transformer config key that holds the width and the names that rank first; its
`score` is the part's `Score`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from inline_core.contract.files import read_json
from inline_core.diffusion.files.shapes import Shapes, read_shapes
from inline_core.models.catalog import CatalogEntry
from inline_core.models.source import Source


@dataclass(frozen=True)
class EncoderWidth:
    model_type: str  # an HF folder's config.json `model_type`
    folder_width: Callable[[Mapping[str, Any]], object]  # the width in that config
    recognize: Callable[[Shapes], bool]  # a single file's header is this encoder's
    file_width: Callable[[Shapes], int]  # and its width
    transformer_config: Callable[[Source], Mapping[str, Any] | None]
    width_key: str  # the transformer config's text input width
    names: tuple[re.Pattern[str], ...]  # an entry named so ranks first
    # A file so named whose header cannot be read is kept (the loader names it when it fails).
    keeps_unreadable: bool = False

    def score(self, entry: CatalogEntry, transformer: Source | None) -> int | None:
        """1 for an encoder named as the family's, 0 for another, as wide as `transformer`
        wants (any width without one); None: not this encoder."""
        named = 1 if any(name.search(entry.name) for name in self.names) else 0
        if entry.is_folder:
            config = read_json(entry.path / "config.json")
            if config is None or config.get("model_type") != self.model_type:
                return None
            width = self.folder_width(config)
        else:
            shapes = read_shapes(entry.path)
            if shapes is None:
                return named if named and self.keeps_unreadable else None
            if not self.recognize(shapes):
                return None
            width = self.file_width(shapes)
        wanted = self.wanted(transformer)
        return None if wanted is not None and width != wanted else named

    def wanted(self, transformer: Source | None) -> int | None:
        config = None if transformer is None else self.transformer_config(transformer)
        value = None if config is None else config.get(self.width_key)
        return value if isinstance(value, int) else None
