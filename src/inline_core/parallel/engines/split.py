"""Which engine splits a rank's transformer, and applying it; we never split by hand.

- cache-dit's context parallelism (`cache_dit.py`): Ulysses and Ring, CUDA and CPU (gloo) ranks.
- xDiT (`xfuser.py`), CUDA only, for pipelines that name xDiT's class for their transformer.

`auto` picks xfuser on CUDA when it imports and the pipeline supports it, else cache-dit.
"""

from __future__ import annotations

import importlib.util
from typing import cast

from inline_core.components.step import (
    supports_context_plan,
    supports_split_notice,
    supports_xdit_split,
)
from inline_core.parallel.engines.base import (
    NoSplit,
    SplitEngine,
    declared,
    declared_all,
    resolve_module,
    set_module,
)
from inline_core.parallel.engines.cache_dit import CacheDitSplit
from inline_core.parallel.engines.xfuser import XFuserSplit, require_xfuser
from inline_core.parallel.runner import WorkerContext

SPLIT_METHODS = frozenset({"ulysses", "ring"})


def choose_engine(context: WorkerContext, pipeline: object) -> str:
    if context.engine != "auto":
        return context.engine
    on_cuda = context.device.startswith("cuda")
    xdit = on_cuda and supports_xdit_split(pipeline)
    return "xfuser" if xdit and importlib.util.find_spec("xfuser") is not None else "cache-dit"


def apply_split(pipeline: object, context: WorkerContext) -> SplitEngine:
    split = context.split
    if not split.is_split:
        return NoSplit()
    unsupported = split.methods - SPLIT_METHODS
    if unsupported:
        raise ValueError(
            f"split {split}: {', '.join(sorted(unsupported))} is not available for this model "
            "(supported: ulysses, ring)"
        )
    if split.world_size != context.world_size:
        raise ValueError(f"split {split} needs {split.world_size} ranks, got {context.world_size}")
    engine: SplitEngine
    if choose_engine(context, pipeline) == "xfuser":
        engine = xfuser_split(pipeline, declared(pipeline, "_dit_modules"), context)
    else:  # every transformer it declares (a pair of experts declares two)
        dits = [resolve_module(pipeline, path) for path in declared_all(pipeline, "_dit_modules")]
        plan = (
            pipeline.context_plan(dict(split.degrees)) if supports_context_plan(pipeline) else None
        )
        engine = CacheDitSplit(dits, split, plan)
    if supports_split_notice(pipeline):
        pipeline.split_by(engine.name, dict(split.degrees))
    return engine


def xfuser_split(pipeline: object, dit_path: str, context: WorkerContext) -> SplitEngine:
    """xDiT's sequence-parallel transformer in place of the resident one."""
    require_xfuser()
    if not supports_xdit_split(pipeline):
        raise ValueError(f"{type(pipeline).__name__} names no xDiT transformer for its model")
    # A denoiser alone (the `sample` primitive's ranks) declares no VAE.
    vae_paths = cast(list[str], getattr(pipeline, "_vae_modules", None) or [])
    vae = resolve_module(pipeline, declared(pipeline, "_vae_modules")) if vae_paths else None
    engine = XFuserSplit(
        pipeline, resolve_module(pipeline, dit_path), vae, context.split, context.local_rank
    )
    set_module(pipeline, dit_path, engine.transformer)
    return engine
