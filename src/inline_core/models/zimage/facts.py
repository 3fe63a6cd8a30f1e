"""What a Z-Image model's files say about it without loading it (torch-free).

Read from a diffusers `config.json` or, for a single file, from the safetensors header's shapes
(the same inference the loaders use), so the server can decide a split and validate request sizes
before any weights exist in its process.
"""

from __future__ import annotations

import json
from typing import Any, cast

from inline_core.models.zimage.header import HEADERS
from inline_core.models.zimage.infer import (
    ConfigInferenceError,
    infer_ldm_vae_config,
    infer_zimage_transformer_config,
)
from inline_core.models.zimage.resolve import Source


def _config(source: Source) -> dict[str, Any] | None:
    """A folder component's `config.json`."""
    try:
        data: object = json.loads((source.location / "config.json").read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return cast(dict[str, Any], data) if isinstance(data, dict) else None


def _shapes(source: Source) -> dict[str, tuple[int, ...]] | None:
    try:
        return {k: v.shape for k, v in HEADERS.get(source.path).items()}
    except Exception:  # unreadable: the loader will name the file when it tries
        return None


def transformer_config(source: Source) -> dict[str, Any] | None:
    """The transformer's config (diffusers naming) without its weights; None when unreadable."""
    if not source.is_file:
        return _config(source)
    shapes = _shapes(source)
    if shapes is None:
        return None
    try:
        return infer_zimage_transformer_config(shapes)
    except ConfigInferenceError:
        return None


def transformer_heads(source: Source) -> int | None:
    """The transformer's attention heads (30 for Z-Image Turbo); None when unreadable."""
    config = transformer_config(source)
    heads: object = None if config is None else config.get("n_heads")
    return heads if isinstance(heads, int) and heads > 0 else None


def vae_spatial_factor(source: Source) -> int | None:
    """Pixels per latent along each side (8 for the FLUX VAE); None when unreadable."""
    channels: object
    if source.is_file:
        shapes = _shapes(source)
        if shapes is None:
            return None
        try:
            channels = infer_ldm_vae_config(shapes)["block_out_channels"]
        except ConfigInferenceError:
            return None
    else:
        config = _config(source)
        channels = None if config is None else config.get("block_out_channels")
    if not isinstance(channels, list) or not channels:
        return None
    return 2 ** (len(cast(list[object], channels)) - 1)
