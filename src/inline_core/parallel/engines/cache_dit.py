"""cache-dit context parallelism (`cache_dit.enable_cache(transformer, parallelism_config=...)`):
Ulysses and Ring, on CUDA and on CPU ranks over gloo, for every transformer cache-dit has a plan
for, or with the plan a pipeline gives for its own (`SupportsContextPlan`). Hooks are added to
the resident transformer in place; no caching is enabled (no `cache_config`), so the output stays
exact."""

from __future__ import annotations

import importlib
from collections.abc import Generator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, cast

from torch import nn

from inline_core.device.split import ParallelSpec


class CacheDitSplit:
    """Splits each of a pipeline's transformers (a pair of experts: both), each on its own."""

    name = "cache-dit"

    def __init__(
        self, dits: Sequence[nn.Module], split: ParallelSpec, plan: Mapping[str, Any] | None = None
    ) -> None:
        import cache_dit

        ulysses, ring = split.degree("ulysses"), split.degree("ring")
        degrees: dict[str, Any] = {}  # an unset degree must stay None (cache-dit's default)
        if ulysses > 1:
            degrees["ulysses_size"] = ulysses
        if ring > 1:
            degrees["ring_size"] = ring
        with _without_settling_sleep():
            for dit in dits:
                config = cache_dit.ParallelismConfig(**degrees, cp_plan=plan)  # None: cache-dit's
                cast(Any, cache_dit).enable_cache(dit, parallelism_config=config)

    def before_job(self, state: Any) -> None:
        return None


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
