"""The shared layer hands a family's new pipeline its step cache backends (spec 003's
request-scoped adoption): one built per transformer, adopted by every pipeline over it. Every part
placed as a denoiser is one (a two-expert model's pair: each expert caches its own steps)."""

from __future__ import annotations

from typing import TypeVar

from inline_core.components.step import adopt_request_scoped_cache_dit
from inline_core.contract.builder import DENOISER, CachesBlocks, Parts
from inline_core.diffusion.stepcache.backend import StepCacheBackend

P = TypeVar("P")


def with_step_cache(builder: object, parts: Parts, pipeline: P) -> P:
    """`pipeline`, having adopted a backend on each of its denoiser parts when its builder
    declares a block layout (a pipeline that does not opt in is left as it is)."""
    if not isinstance(builder, CachesBlocks):
        return pipeline
    for part, role in builder.roles.items():
        if role == DENOISER and part in parts.values:
            backend = StepCacheBackend.of(parts[part], builder.step_cache_layout)
            if not adopt_request_scoped_cache_dit(pipeline, backend):
                break
    return pipeline
