"""Step caching (DBCache, kept per request) of any family's step pipeline on its tiny kit, whose
cached block list has two blocks: the first its front block (always computed), the second its
middle block (computed or reused per row). A threshold of 0 never reuses; a loose one, far above
the random weights' step-to-step residual change (0.5 by default; FLUX.2's tiny model moves by 1
to 1.8, so its test passes 4), reuses as often as its cap allows, and no few ulps of batching
flip a decision."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

import numpy as np

from inline_core.graph.runner import NodeResult
from inline_core.runtime.step_cache import StepCacheChoice, StepCacheSettings
from inline_core.sampling.job import SampleJob
from inline_core.sampling.loop import StepLoopSampler
from tests.families.batching_harness import solo_and_together

NEVER = StepCacheSettings(threshold=0.0, warmup=0, front_blocks=1)
LOOSE = StepCacheSettings(threshold=0.5, warmup=1, front_blocks=1, max_consecutive=2)
TOLERANCE = 2  # levels of 255: a batch of more rows is blocked otherwise by the CPU's kernels
MAX_DIFFERING = 0.01  # share of values allowed to differ at all


def check_step_cache(
    sampler: StepLoopSampler,
    pipeline: Any,
    spec: dict[str, Any],
    pixels: Callable[[Any], np.ndarray[Any, Any]],
    rows: int,
    loose: StepCacheSettings = LOOSE,
    calls: int | None = None,
) -> None:
    """`spec` (a request of `rows` rows a step) cached never, then loosely: the first equals no
    caching to the last level and counts every block computed; the second reuses, skips one
    block per reused row step, and renders alone what it renders batched with an uncached
    request of its shape. `calls`: the model calls the render makes, where its sampler calls
    other than once a step (Heun's two)."""
    steps = int(spec["steps"]) if calls is None else calls

    def run(state: Any) -> np.ndarray[Any, Any]:
        return pixels(sampler.run(SampleJob(pipeline, state)))

    plain = run(pipeline.request(**spec))
    never = pipeline.request(**spec, step_cache=NEVER)
    assert int(np.abs(plain - run(never)).max()) == 0
    counted = never.cache.stats()
    assert counted["computedSteps"] == rows * steps and counted["reusedSteps"] == 0
    assert counted["skippedBlocks"] == 0 and counted["computedBlocks"] == 2 * rows * steps

    state = pipeline.request(**spec, step_cache=loose)
    cached = run(state)
    counted = state.cache.stats()
    assert counted["computedSteps"] + counted["reusedSteps"] == rows * steps
    assert counted["reusedSteps"] > 0 and counted["skippedBlocks"] == counted["reusedSteps"], (
        counted
    )
    assert int(np.abs(plain - cached).max()) > 0  # an approximation: not the same picture

    other = {**spec, "prompt": "another prompt", "seed": int(spec["seed"]) + 1}
    solo, together, stats = solo_and_together(
        sampler, pipeline, [{**spec, "step_cache": loose}, other], pixels
    )
    assert stats["batchedForwards"] > 0
    for alone, batched in zip(solo, together, strict=True):
        difference = np.abs(alone - batched)
        assert int(difference.max()) <= TOLERANCE
        assert float((difference > 0).mean()) <= MAX_DIFFERING


def check_joined_mid_render(
    sampler: StepLoopSampler,
    pipeline: Any,
    specs: Sequence[dict[str, Any]],
    pixels: Callable[[Any], np.ndarray[Any, Any]],
    join_step: int,
) -> None:
    """The first of `specs` (each a request with its own `seed`, `steps` and `step_cache`) is
    rendered; at its `join_step` the others join its forwards (the sampler's phases on the loop,
    so a request submitted between two forwards is in the next one). Every row decides on its
    own, so each renders what it renders alone, with the same cache decisions, though they share
    forwards at different steps."""

    def counts(state: Any) -> dict[str, int] | None:
        return None if state.cache is None else dict(state.cache.stats())

    alone: list[np.ndarray[Any, Any]] = []
    alone_counts: list[dict[str, int] | None] = []
    for spec in specs:
        state = pipeline.request(**spec)
        alone.append(pixels(sampler.run(SampleJob(pipeline, state))))
        alone_counts.append(counts(state))

    states = [pipeline.request(**spec) for spec in specs]
    first_seed = states[0].seed
    arrived: list[Future[Any]] = []
    batches: list[tuple[int, ...]] = []
    forward = pipeline.denoise_step
    lock = threading.Lock()

    def watched(batch: Sequence[Any], /) -> Any:
        with lock:
            batches.append(tuple(s.seed for s in batch))
            if not arrived and batch[0].seed == first_seed and batch[0].step_index == join_step:
                arrived.extend(sampler.submit(SampleJob(pipeline, s)) for s in states[1:])
        return forward(batch)

    pipeline.denoise_step = watched
    try:
        first = pixels(sampler.run(SampleJob(pipeline, states[0])))
        together = [first, *(pixels(f.result(timeout=120)) for f in arrived)]
    finally:
        del pipeline.denoise_step

    assert tuple(s.seed for s in states) in batches  # they shared forwards, at different steps
    for i, (solo, batched) in enumerate(zip(alone, together, strict=True)):
        difference = np.abs(solo - batched)
        assert int(difference.max()) <= TOLERANCE, f"request {i}"
        assert float((difference > 0).mean()) <= MAX_DIFFERING, f"request {i}"
    assert [counts(s) for s in states] == alone_counts
    cached = [c for c in alone_counts if c is not None]
    assert len(cached) >= 2 and all(c["reusedSteps"] > 0 for c in cached)


def check_served_step_cache(
    run: Callable[[StepCacheChoice], NodeResult],
    pixels: Callable[[NodeResult], np.ndarray[Any, Any]],
    loose: StepCacheSettings = LOOSE,
) -> None:
    """A family node serves the run's step cache (`options.cache`): `run` renders one short
    request with the run's choice. Not asked for, a short render is not cached (the policy starts
    at 20 steps); asked never to reuse, it equals that render and its take counts only computed
    steps; asked loosely, its take records the settings and the steps it reused."""
    plain = run(StepCacheChoice())
    assert "cache" not in plain.takes[0].params
    never = run(StepCacheChoice(True, NEVER))
    assert never.takes[0].params["cache"] == NEVER.to_json()
    assert never.takes[0].params["cacheCounts"]["reusedSteps"] == 0
    assert int(np.abs(pixels(never) - pixels(plain)).max()) == 0
    cached = run(StepCacheChoice(True, loose))
    assert cached.takes[0].params["cache"] == loose.to_json()
    assert cached.takes[0].params["cacheCounts"]["reusedSteps"] > 0
    assert int(np.abs(pixels(cached) - pixels(plain)).max()) > 0  # reused steps move the picture
