"""Batching tests' one way to make requests meet in a forward: the step loop itself is held at a
boundary, before it admits any of them, until every submitted job is encoded and waiting, then
released, so all of them enter the loop together and which requests share a forward does not
depend on how fast this machine submits or encodes them. (Holding the first forward instead was
not enough: a job encoded first entered that forward alone, and the rest joined a step behind.)

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
    """Submit `jobs` with the loop held at a boundary until all of them wait to be admitted; their
    outputs, in order. The hold has no bound of its own (the `finally` always releases it): on a
    loaded machine the others may take long to encode, and a loop released early would admit
    fewer of them at once."""
    release = threading.Event()
    holding = threading.Event()

    def hold_the_loop() -> None:  # runs on the loop thread, before it admits what is waiting
        holding.set()
        release.wait()

    forward = pipeline.denoise_step
    if on_forward is not None:
        seen = on_forward

        def watched(states: Sequence[Any], /) -> Any:
            seen(states)
            return forward(states)

        pipeline.denoise_step = watched
    futures: list[Future[Any]] = []
    try:
        sampler.call_soon(hold_the_loop)
        wait_until(holding.is_set, "the step loop to hold")
        futures = [sampler.submit(job) for job in jobs]
        wait_until(lambda: all_in_loop(sampler, len(jobs)), f"all {len(jobs)} jobs in the loop")
        release.set()
        return [f.result(timeout=RESULT_TIMEOUT_S) for f in futures]
    finally:
        release.set()
        if on_forward is not None:
            del pipeline.denoise_step
