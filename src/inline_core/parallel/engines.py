"""The engines that split a DiT's forward across ranks; we never split by hand.

- cache-dit context parallelism (`cache_dit.enable_cache(transformer, parallelism_config=...)`):
  Ulysses and Ring, on CUDA and on CPU ranks over gloo. Hooks are added to the resident
  transformer in place; no caching is enabled (no `cache_config`), so the output stays exact.
- xDiT (`xfuser`), CUDA only: its sequence-parallel Z-Image transformer (USP: Ulysses and Ring;
  xDiT has no PipeFusion for Z-Image) replaces the resident one, sharing its weights
  (`xfuser_split.py`). xfuser does not import on a CPU-only torch, so it is only imported when
  chosen.

`auto` picks xfuser on CUDA when it imports, else cache-dit.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
from collections.abc import Generator
from contextlib import contextmanager
from typing import Any, Protocol, cast

from torch import nn

from inline_core.device.split import ParallelSpec
from inline_core.parallel.runner import WorkerContext
from inline_core.parallel.xfuser_split import XFuserZImage, require_xfuser

log = logging.getLogger(__name__)

SPLIT_METHODS = frozenset({"ulysses", "ring"})


class SplitEngine(Protocol):
    name: str

    def before_job(self, state: Any) -> None:
        """Tell the engine about the request about to run (xfuser keeps per-size state)."""
        ...


class NoSplit:
    name = "none"

    def before_job(self, state: Any) -> None:
        return None


class CacheDitSplit:
    name = "cache-dit"

    def __init__(self, dit: nn.Module, split: ParallelSpec) -> None:
        import cache_dit

        ulysses, ring = split.degree("ulysses"), split.degree("ring")
        degrees: dict[str, Any] = {}  # an unset degree must stay None (cache-dit's default)
        if ulysses > 1:
            degrees["ulysses_size"] = ulysses
        if ring > 1:
            degrees["ring_size"] = ring
        config = cache_dit.ParallelismConfig(**degrees)
        with _without_settling_sleep():
            cast(Any, cache_dit).enable_cache(dit, parallelism_config=config)

    def before_job(self, state: Any) -> None:
        return None


def xfuser_split(pipeline: object, context: WorkerContext) -> SplitEngine:
    """xDiT's sequence-parallel Z-Image transformer in place of the resident one."""
    require_xfuser()
    dit_path = _declared(pipeline, "_dit_modules")
    # A denoiser alone (the `sample` primitive's ranks) declares no VAE.
    vae_paths = cast(list[str], getattr(pipeline, "_vae_modules", None) or [])
    vae = resolve_module(pipeline, _declared(pipeline, "_vae_modules")) if vae_paths else None
    engine = XFuserZImage(
        resolve_module(pipeline, dit_path), vae, context.split, context.local_rank
    )
    set_module(pipeline, dit_path, engine.transformer)
    return engine


@contextmanager
def _without_settling_sleep() -> Generator[None]:
    """cache-dit 1.5 sleeps 1 s (2 s on CUDA) and collects garbage after enabling parallelism, to
    let a tensor-parallel memory peak settle. Context parallelism copies no weights, so the wait
    was only start-up time: 1.2 of a group's 8-11 s on CPU. Skipped while we enable it."""
    dispatch = cast(Any, importlib.import_module("cache_dit.distributed.dispatch"))
    settle = getattr(dispatch, "maybe_empty_cache", None)
    if settle is None:  # another cache-dit: leave it as it is
        yield
        return
    dispatch.maybe_empty_cache = _no_settling
    try:
        yield
    finally:
        dispatch.maybe_empty_cache = settle


def _no_settling() -> None:
    return None


def choose_engine(context: WorkerContext) -> str:
    if context.engine != "auto":
        return context.engine
    on_cuda = context.device.startswith("cuda")
    return "xfuser" if on_cuda and importlib.util.find_spec("xfuser") is not None else "cache-dit"


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
    engine = choose_engine(context)
    if engine == "xfuser":
        return xfuser_split(pipeline, context)
    return CacheDitSplit(resolve_module(pipeline, _declared(pipeline, "_dit_modules")), split)


def _declared(pipeline: object, attribute: str) -> str:
    """The one module path a pipeline declares under `attribute` (spec 003's `_dit_modules`...)."""
    paths: object = getattr(pipeline, attribute, None)
    if not isinstance(paths, list):
        raise TypeError(f"{type(pipeline).__name__} does not declare {attribute}")
    paths = cast(list[str], paths)
    if len(paths) != 1:
        raise TypeError(f"{type(pipeline).__name__}.{attribute} must name exactly one module")
    return paths[0]


def resolve_module(root: object, dotted: str) -> nn.Module:
    target: object = root
    for part in dotted.split("."):
        target = getattr(target, part)
    if not isinstance(target, nn.Module):
        raise TypeError(f"{dotted} is a {type(target).__name__}, not a torch module")
    return target


def set_module(root: object, dotted: str, module: nn.Module) -> None:
    parent_path, _, name = dotted.rpartition(".")
    parent = root
    for part in parent_path.split(".") if parent_path else ():
        parent = getattr(parent, part)
    setattr(parent, name, module)
