"""Batching equals alone, for any family's step pipeline: each request rendered alone, then all
submitted together while the loop's forward is held until every one is in the loop, so they
share forwards. A family test compares the two lists."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from inline_core.sampling.job import SampleJob
from inline_core.sampling.loop import StepLoopSampler
from tests.server.server_support import wait_until


def all_in_loop(sampler: StepLoopSampler, count: int) -> bool | None:
    stats = sampler.stats()
    ready = stats["encodingJobs"] == 0 and stats["activeJobs"] + stats["queuedJobs"] == count
    return True if ready else None


def solo_and_together(
    sampler: StepLoopSampler,
    pipeline: Any,
    requests: Sequence[dict[str, Any]],
    pixels: Callable[[Any], Any],
) -> tuple[list[Any], list[Any], dict[str, Any]]:
    """(each alone, all together, the loop's stats of the together part)."""
    solo = [pixels(sampler.run(SampleJob(pipeline, pipeline.request(**r)))) for r in requests]
    before = sampler.stats()["batchedForwards"]
    release = threading.Event()
    forward = pipeline.denoise_step

    def held(states: Sequence[Any], /) -> Any:
        release.wait()  # parked until all are in the loop (released in `finally` at worst)
        return forward(states)

    pipeline.denoise_step = held
    try:
        futures = [sampler.submit(SampleJob(pipeline, pipeline.request(**r))) for r in requests]
        wait_until(lambda: all_in_loop(sampler, len(requests)), "all of them in the loop")
        release.set()
        together = [pixels(f.result(timeout=300)) for f in futures]
    finally:
        release.set()
        del pipeline.denoise_step
    stats = dict(sampler.stats())
    stats["batchedForwards"] -= before
    return solo, together, stats
