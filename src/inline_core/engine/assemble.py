"""A family's loaded parts assembled into the pipeline a render drives, the same way in process
(`stacks.py`, parts from the residency) and on a rank (`remote.py`, parts loaded there).

The shared layer hands the new pipeline its step cache backends (spec 003's request-scoped
adoption): one built per transformer, adopted by every pipeline over it. Every part placed as a
denoiser is one (a two-expert model's pair: each expert caches its own steps).
"""

from __future__ import annotations

from typing import Any, TypeVar

from inline_core.components.step import adopt_request_scoped_cache_dit
from inline_core.contract.builder import DENOISER, CachesBlocks, FamilyBuilder, Parts, placed_as
from inline_core.contract.family import Stack
from inline_core.diffusion.stepcache.backend import StepCacheBackend

P = TypeVar("P")


def assemble(builder: FamilyBuilder, parts: Parts, stack: Stack) -> Any:
    """`stack` (a node's whole stack, or the denoiser alone) over `parts`, its step cache
    adopted."""
    made = builder.denoiser(parts) if stack == "denoiser" else builder.pipeline(parts)
    return with_step_cache(builder, parts, made)


def with_step_cache(builder: object, parts: Parts, pipeline: P) -> P:
    """`pipeline`, having adopted a backend on each of its denoiser parts when its builder
    declares a block layout (a pipeline that does not opt in is left as it is)."""
    if not isinstance(builder, CachesBlocks):
        return pipeline
    for model in placed_as(DENOISER, builder.roles, parts).values():
        backend = StepCacheBackend.of(model, builder.step_cache_layout)
        if not adopt_request_scoped_cache_dit(pipeline, backend):
            break
    return pipeline
