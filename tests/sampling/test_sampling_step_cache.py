"""Step caching (DBCache) kept per request on the real tiny Z-Image, through the step loop.

The kit's transformer has two main blocks: the first is its front block (always computed), the
second its middle block (computed or reused per row). Its random weights move the front
residual by 0.6-1.0 (relative L1) from step to step, so the thresholds here are high: what
matters is that each row decides on its own and that batching never changes a decision."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from typing import Any

import pytest

pytest.importorskip("diffusers")

from zimage_sampling_kit import Watched, load_pipeline, pixels  # noqa: E402

from inline_core.diffusion.stepcache.rows import RowCache  # noqa: E402
from inline_core.families.zimage.pipeline import ZImageStepPipeline  # noqa: E402
from inline_core.families.zimage.request import ZImageRequest  # noqa: E402
from inline_core.runtime.step_cache import StepCacheSettings  # noqa: E402
from inline_core.sampling import SampleJob, StepLoopSampler  # noqa: E402

PIXEL_TOLERANCE = 1  # a padded batch sums in another order than a lone forward (~1e-6)

NEVER = StepCacheSettings(threshold=0.0, warmup=0, front_blocks=1)
TIGHT = StepCacheSettings(threshold=1e-6, warmup=0, front_blocks=1)  # compares, never reuses
LOOSE = StepCacheSettings(threshold=0.97, warmup=2, front_blocks=1, max_consecutive=2)
OTHER = StepCacheSettings(threshold=0.9, warmup=1, front_blocks=1, max_consecutive=3)


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZImageStepPipeline]:
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny forwards: no OpenMP barrier stalls on a shared machine
    loader = StepLoopSampler(max_batch=1)
    yield load_pipeline(tmp_path_factory.mktemp("zimage-step-cache") / "models", loader)
    loader.close()
    torch.set_num_threads(threads)


@pytest.fixture
def sampler() -> Iterator[StepLoopSampler]:
    s = StepLoopSampler(max_batch=8, token_budget=4096, phases="loop")
    yield s
    s.close()


def request(
    pipeline: ZImageStepPipeline, seed: int, cache: StepCacheSettings | None, **spec: Any
) -> ZImageRequest:
    values: dict[str, Any] = {"prompt": f"a fox number {seed}", "width": 64, "height": 64}
    values.update(steps=12, guidance=0.0, seed=seed, step_cache=cache)
    return pipeline.request(**{**values, **spec})


def render(sampler: StepLoopSampler, pipeline: Any, state: ZImageRequest) -> Any:
    return pixels(sampler.run(SampleJob(pipeline, state)))


def stats(state: ZImageRequest) -> dict[str, int]:
    assert state.cache is not None
    return state.cache.stats()


def max_diff(a: Any, b: Any) -> int:
    return int(abs(a - b).max())


@pytest.mark.parametrize("never", [NEVER, TIGHT], ids=["threshold-0", "threshold-1e-6"])
def test_a_threshold_that_never_reuses_equals_no_caching_to_the_last_level(
    pipeline: ZImageStepPipeline, sampler: StepLoopSampler, never: StepCacheSettings
) -> None:
    plain = render(sampler, pipeline, request(pipeline, 1, None, guidance=2.0))
    state = request(pipeline, 1, never, guidance=2.0)
    cached = render(sampler, pipeline, state)
    assert max_diff(plain, cached) == 0
    # Both rows (the prompt and the negative one) computed at every step.
    assert stats(state) == {
        "computedSteps": 24,
        "reusedSteps": 0,
        "skippedBlocks": 0,
        "computedBlocks": 24 * 2,
    }


def test_a_threshold_that_reuses_skips_blocks_and_counts_them(
    pipeline: ZImageStepPipeline, sampler: StepLoopSampler
) -> None:
    plain = render(sampler, pipeline, request(pipeline, 2, None))
    state = request(pipeline, 2, LOOSE)
    cached = render(sampler, pipeline, state)
    counted = stats(state)
    assert counted["computedSteps"] + counted["reusedSteps"] == 12
    assert counted["reusedSteps"] >= 3
    # One middle block is skipped per reused step (two blocks: one front, one middle).
    assert counted["skippedBlocks"] == counted["reusedSteps"]
    assert counted["computedSteps"] >= LOOSE.warmup + 1
    assert max_diff(plain, cached) > 0  # an approximation: not the same pixels


def test_a_row_reuses_only_after_warmup_and_at_most_its_cap_in_a_row() -> None:
    """The rule each row follows before comparing residuals (no model needed)."""
    import torch

    row = RowCache(StepCacheSettings(threshold=0.5, warmup=3, front_blocks=1, max_consecutive=2))
    may: list[bool] = []
    for _ in range(11):
        allowed = row.may_reuse()
        may.append(allowed)
        if not allowed:  # a computed step keeps its residuals
            row.front = row.middle = torch.zeros(1)
        row.record(allowed, middle=5, blocks=7)
    assert may == [False, False, False, True, True, False, True, True, False, True, True]
    assert (row.computed, row.reused, row.skipped_blocks) == (5, 6, 30)
    assert row.computed_blocks == 11 * 7 - 30
    assert not RowCache(StepCacheSettings(threshold=0.0, warmup=0)).may_reuse()


def test_a_cached_request_batched_with_others_renders_as_it_does_alone(
    pipeline: ZImageStepPipeline, sampler: StepLoopSampler
) -> None:
    """The first request is cached; at its fourth step two more join its forwards: one cached
    with other settings and a longer prompt (a padded row), one not cached at all. Every row
    decides on its own, so each renders what it renders alone, with the same decisions."""
    specs: list[tuple[int, StepCacheSettings | None, dict[str, Any]]] = [
        (11, LOOSE, {"steps": 14}),
        (12, OTHER, {"prompt": "a much longer prompt for the second of the requests"}),
        (13, None, {"steps": 8}),
    ]
    alone: list[Any] = []
    alone_stats: list[dict[str, int] | None] = []
    for seed, cache, spec in specs:
        state = request(pipeline, seed, cache, **spec)
        alone.append(render(sampler, pipeline, state))
        alone_stats.append(None if cache is None else stats(state))

    watched = Watched(pipeline)
    watched.release.set()
    states = [request(pipeline, seed, cache, **spec) for seed, cache, spec in specs]
    arrived: list[Future[Any]] = []

    def arrive(batch: Sequence[ZImageRequest]) -> None:
        if not arrived and batch[0].seed == 11 and batch[0].step_index == 3:
            arrived.extend(sampler.submit(SampleJob(watched, s)) for s in states[1:])

    watched.before_forward.append(arrive)
    first = pixels(sampler.run(SampleJob(watched, states[0])))
    together = [first, *(pixels(f.result(timeout=120)) for f in arrived)]

    assert (11, 12, 13) in watched.batches  # they shared forwards, at different steps
    for i, (solo, batched) in enumerate(zip(alone, together, strict=True)):
        assert max_diff(solo, batched) <= PIXEL_TOLERANCE, f"request {i}"
    assert [None if s.cache is None else stats(s) for s in states] == alone_stats
    assert alone_stats[0] is not None and alone_stats[0]["reusedSteps"] > 0
    assert alone_stats[1] is not None and alone_stats[1]["reusedSteps"] > 0
