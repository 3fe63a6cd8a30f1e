"""A component's config without loading its weights (torch-free): a folder's `config.json`, or
inferred from a single file's header shapes by the format's rule. Remembered per file identity,
so a resolution that scores many candidates against one transformer infers its config once."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, cast

from inline_core.diffusion.files.shapes import ConfigInferenceError, Shapes, read_shapes
from inline_core.models.source import Source

Infer = Callable[[Shapes], dict[str, Any]]


class ConfigReader:
    def __init__(self, infer: Infer) -> None:
        self.infer = infer
        self._configs: dict[str, dict[str, Any] | None] = {}

    def __call__(self, source: Source) -> dict[str, Any] | None:
        """The config; None when unreadable (the loader will name the file when it tries)."""
        identity = source.identity()
        if identity not in self._configs:
            self._configs[identity] = self._read(source)
        return self._configs[identity]

    def _read(self, source: Source) -> dict[str, Any] | None:
        if not source.is_file:
            try:
                data: object = json.loads((source.location / "config.json").read_text("utf-8"))
            except (OSError, ValueError):
                return None
            return cast(dict[str, Any], data) if isinstance(data, dict) else None
        shapes = read_shapes(source.path, source.view)
        if shapes is None:
            return None
        try:
            return self.infer(shapes)
        except ConfigInferenceError:
            return None
