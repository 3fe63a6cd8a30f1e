"""Batching equals alone, for any family's step pipeline: each request rendered alone, then all
submitted together while the loop's forward is held until every one is in the loop, so they
share forwards. A family test compares the two lists."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from inline_core.sampling.job import SampleJob
from inline_core.sampling.loop import StepLoopSampler
from tests.batching_helpers import run_together


def solo_and_together(
    sampler: StepLoopSampler,
    pipeline: Any,
    requests: Sequence[dict[str, Any]],
    pixels: Callable[[Any], Any],
) -> tuple[list[Any], list[Any], dict[str, Any]]:
    """(each alone, all together, the loop's stats of the together part)."""
    solo = [pixels(sampler.run(SampleJob(pipeline, pipeline.request(**r)))) for r in requests]
    before = sampler.stats()["batchedForwards"]
    jobs = [SampleJob(pipeline, pipeline.request(**r)) for r in requests]
    together = [pixels(out) for out in run_together(sampler, pipeline, jobs)]
    stats = dict(sampler.stats())
    stats["batchedForwards"] -= before
    return solo, together, stats


def assert_batched_equals_alone(
    solo: Sequence[Any],
    together: Sequence[Any],
    stats: dict[str, Any],
    tolerance: int,
    max_differing: float,
) -> None:
    """The requests shared forwards, and each together is its alone within `tolerance` levels on
    at most `max_differing` of its values (a row batched with others differs by a few ulps)."""
    import numpy as np

    assert stats["batchedForwards"] > 0 and stats["meanBatch"] > 1.0
    for alone, batched in zip(solo, together, strict=True):
        difference = np.abs(alone - batched)
        assert int(difference.max()) <= tolerance
        assert float((difference > 0).mean()) <= max_differing
