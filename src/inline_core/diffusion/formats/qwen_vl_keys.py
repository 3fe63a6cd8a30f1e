"""The key naming of Qwen's vision-language single files (Qwen2.5-VL, Qwen3-VL), torch-free: HF's
checkpoints before and after transformers 5 and ComfyUI's, all reduced to the `*VLModel` keys
(`language_model.`, `visual.`); an LM head is left out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inline_core.diffusion.files.shapes import Shapes

_RENAMES = (
    ("model.language_model.", "language_model."),
    ("model.visual.", "visual."),
    ("model.", "language_model."),
    ("visual.", "visual."),
    ("language_model.", "language_model."),
)


def renamed(key: str) -> str | None:
    """A single file's key as the model's (None: not one of its weights)."""
    for old, new in _RENAMES:
        if key.startswith(old):
            return new + key[len(old) :]
    return None


def model_shapes(shapes: Shapes) -> dict[str, tuple[int, ...]]:
    out: dict[str, tuple[int, ...]] = {}
    for key, shape in shapes.items():
        new = renamed(key)
        if new is not None:
            out[new] = tuple(shape)
    return out


def from_single(sd: dict[str, Any], _config: Mapping[str, Any]) -> dict[str, Any]:
    """A single file's keys -> the `*VLModel`'s (the LM head left out)."""
    out: dict[str, Any] = {}
    for key, value in sd.items():
        new = renamed(key)
        if new is not None:
            out[new] = value
    return out
