"""ComfyUI's input specs as `/object_info` writes them (torch-free data), for the server's own node
definitions and for the classes a family's recipe adds (`comfy_recipe.ComfyClass`).

A spec is `[TYPE]` or `[TYPE, options]`; a combo is `[[choices...], options]`. Choices that come
from the server (model files, samplers, uploaded images) are a `Picker`, filled in when
`/object_info` is answered.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MAX_RESOLUTION = 16384
MAX_SEED = 0xFFFFFFFFFFFFFFFF


@dataclass(frozen=True)
class Picker:
    """A combo whose choices the server supplies: a catalog category (`text_encoders`, ...),
    `samplers`, `schedulers` or `images` (uploaded inputs)."""

    source: str
    options: dict[str, Any] = field(default_factory=dict[str, Any])


Spec = list[Any] | Picker


def INT(default: int, lo: int, hi: int, step: int = 1, **extra: Any) -> list[Any]:  # noqa: N802
    return ["INT", {"default": default, "min": lo, "max": hi, "step": step, **extra}]


def FLOAT(  # noqa: N802
    default: float, lo: float, hi: float, step: float = 0.01, **extra: Any
) -> list[Any]:
    return ["FLOAT", {"default": default, "min": lo, "max": hi, "step": step, **extra}]


def STRING(default: str = "", **extra: Any) -> list[Any]:  # noqa: N802
    return ["STRING", {"default": default, **extra}]


def BOOLEAN(default: bool, **extra: Any) -> list[Any]:  # noqa: N802
    return ["BOOLEAN", {"default": default, **extra}]


def COMBO(*choices: str, **extra: Any) -> list[Any]:  # noqa: N802
    return [list(choices), dict(extra)] if extra else [list(choices)]


def LINK(kind: str) -> list[Any]:  # noqa: N802
    """An input another node's output feeds (MODEL, CLIP, CONDITIONING, ...)."""
    return [kind]
