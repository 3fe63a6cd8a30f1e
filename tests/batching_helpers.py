"""Batching tests' one way to make requests meet in a forward: the step loop's forwards are held
until every submitted job is in the loop, then released, so which requests share a forward does
not depend on how fast this machine submits or encodes them.

`run_together(sampler, pipeline, jobs)` does it and returns the jobs' outputs; `on_forward` sees
each held forward's states (what met). Family tests use it instead of writing their own hold.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from inline_core.sampling.job import SampleJob
from inline_core.sampling.loop import StepLoopSampler
from tests.server.server_support import wait_until

RESULT_TIMEOUT_S = 300.0  # a liveness bound for a whole batched render on a loaded machine


def all_in_loop(sampler: StepLoopSampler, count: int) -> bool | None:
    """True once `count` jobs are encoded and in the loop (held or queued); None: not yet."""
    stats = sampler.stats()
    ready = stats["encodingJobs"] == 0 and stats["activeJobs"] + stats["queuedJobs"] == count
    return True if ready else None


def run_together(
    sampler: StepLoopSampler,
    pipeline: Any,
    jobs: Sequence[SampleJob],
    *,
    on_forward: Callable[[Sequence[Any]], None] | None = None,
) -> list[Any]:
    """Submit `jobs` with the loop's first forward held until all of them are in it; their
    outputs, in order. The hold has no bound of its own (the `finally` always releases it): on a
    loaded machine the others may take long to encode, and a forward released early would batch
    fewer rows."""
    release = threading.Event()
    forward = pipeline.denoise_step

    def held(states: Sequence[Any], /) -> Any:
        release.wait()
        if on_forward is not None:
            on_forward(states)
        return forward(states)

    pipeline.denoise_step = held
    futures: list[Future[Any]] = []
    try:
        futures = [sampler.submit(job) for job in jobs]
        wait_until(lambda: all_in_loop(sampler, len(jobs)), f"all {len(jobs)} jobs in the loop")
        release.set()
        return [f.result(timeout=RESULT_TIMEOUT_S) for f in futures]
    finally:
        release.set()
        del pipeline.denoise_step
