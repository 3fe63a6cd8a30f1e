"""The shared layer hands a family's new pipeline its step cache backend (spec 003's
request-scoped adoption): built once per transformer, adopted by every pipeline over it."""

from __future__ import annotations

from typing import TypeVar

from inline_core.components.step import adopt_request_scoped_cache_dit
from inline_core.diffusion.stepcache.backend import StepCacheBackend
from inline_core.families.builder import CachesBlocks, Parts

P = TypeVar("P")


def with_step_cache(builder: object, parts: Parts, pipeline: P) -> P:
    """`pipeline`, having adopted the backend on its transformer when its builder declares a
    block layout (a pipeline that does not opt in is left as it is)."""
    if isinstance(builder, CachesBlocks) and "transformer" in parts.values:
        backend = StepCacheBackend.of(parts["transformer"], builder.step_cache_layout)
        adopt_request_scoped_cache_dit(pipeline, backend)
    return pipeline
