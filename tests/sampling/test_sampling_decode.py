"""Batched decode across jobs (`post_decode_many`): grouping, limits, fallback, cancel."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

import pytest
from sampling_toy import (
    BatchDecodeToy,
    Callers,
    ToyState,
    fresh,
    make_job,
    make_state,
    solo_render,
    wait_until,
)

from inline_core.errors import Cancelled
from inline_core.sampling import SampleJob, StepLoopSampler
from inline_core.sampling.loop import PhasePlacement


def new_sampler(
    made: list[StepLoopSampler],
    *,
    max_batch: int = 8,
    phases: PhasePlacement = "caller",
    decode_pixel_budget: int | None = None,
) -> StepLoopSampler:
    sampler = StepLoopSampler(
        max_batch, 10_000, phases=phases, decode_pixel_budget=decode_pixel_budget
    )
    made.append(sampler)
    return sampler


def submit_together(
    sampler: StepLoopSampler, pipeline: BatchDecodeToy, jobs: Sequence[SampleJob]
) -> list[Future[Any]]:
    """Submit `jobs` while the loop is parked in the forward of a pilot job (another batch key,
    one step), so they are all admitted at the next boundary and those with equal step counts
    finish in the same forward, whichever thread runs the phases."""
    release = threading.Event()
    pipeline.before_forward.append(lambda _states: release.wait(10.0))
    pilot = sampler.submit(
        make_job(pipeline, make_state(PILOT, seed=99, size=5, steps=1, cfg=True))
    )
    wait_until(lambda: bool(pipeline.batches), "the pilot in its forward")
    futures = [sampler.submit(job) for job in jobs]

    def queued() -> bool:
        stats = sampler.stats()
        return stats["encodingJobs"] == 0 and stats["queuedJobs"] == len(jobs)

    wait_until(queued, "all jobs queued")
    release.set()
    pilot.result(timeout=10)
    return futures


def submit_states(
    sampler: StepLoopSampler, pipeline: BatchDecodeToy, states: Sequence[ToyState]
) -> list[Future[Any]]:
    return submit_together(sampler, pipeline, [make_job(pipeline, s) for s in states])


PILOT = "pilot"


def groups(pipeline: BatchDecodeToy) -> list[set[str]]:
    return [set(call) for call in pipeline.decode_calls if call != (PILOT,)]


SAME_STEPS = [
    make_state("a", seed=1, size=2, steps=3),
    make_state("b", seed=2, size=2, steps=3, prompt="a dog"),
    make_state("c", seed=3, size=3, steps=3),
    make_state("d", seed=4, size=2, steps=3, prompt="a tree"),
    make_state("e", seed=5, size=3, steps=3, prompt="sea"),
]


@pytest.mark.parametrize("phases", ["caller", "loop"])
def test_jobs_finishing_together_are_decoded_together_by_shape(
    samplers: list[StepLoopSampler], phases: PhasePlacement
) -> None:
    sampler = new_sampler(samplers, phases=phases)
    pipeline = BatchDecodeToy()
    futures = submit_states(sampler, pipeline, fresh(SAME_STEPS))

    got = [f.result(timeout=10) for f in futures]
    assert got == [solo_render(s) for s in fresh(SAME_STEPS)]
    assert sorted(groups(pipeline), key=len) == [{"c", "e"}, {"a", "b", "d"}]
    stats = sampler.stats()
    assert (stats["batchedDecodes"], stats["batchDecodedJobs"]) == (2, 5)
    assert stats["decodingJobs"] == 0


def test_threads_calling_run_are_decoded_together(samplers: list[StepLoopSampler]) -> None:
    sampler = new_sampler(samplers)
    pipeline = BatchDecodeToy()
    release = threading.Event()
    pipeline.before_forward.append(lambda _states: release.wait(10.0))
    states = [make_state(f"r{i}", seed=10 + i, size=2, steps=2) for i in range(4)]
    callers = Callers(sampler, pipeline, states)
    wait_until(
        lambda: (
            bool(pipeline.batches)
            and sampler.stats()["activeJobs"] + sampler.stats()["queuedJobs"] == 4
            and sampler.stats()["encodingJobs"] == 0
        ),
        "all jobs queued",
    )
    release.set()
    callers.join(10)

    assert [callers.results[s.name] for s in states] == [solo_render(s) for s in fresh(states)]
    assert groups(pipeline) == [{"r0", "r1", "r2", "r3"}]


def test_decode_groups_respect_max_batch_and_the_pixel_budget(
    samplers: list[StepLoopSampler],
) -> None:
    states = [make_state(f"j{i}", seed=i, size=2, steps=2) for i in range(5)]
    capped = BatchDecodeToy()
    by_batch = new_sampler(samplers, max_batch=3)
    for f in submit_states(by_batch, capped, fresh(states)):
        f.result(timeout=10)
    assert sorted(len(g) for g in groups(capped)) == [2, 3]

    budgeted = BatchDecodeToy()
    by_pixels = new_sampler(samplers, decode_pixel_budget=2 * 4)  # two 2x2 jobs
    for f in submit_states(by_pixels, budgeted, fresh(states)):
        f.result(timeout=10)
    assert sorted(len(g) for g in groups(budgeted)) == [1, 2, 2]

    # A job over the budget on its own is still decoded, alone.
    alone = BatchDecodeToy()
    tight = new_sampler(samplers, decode_pixel_budget=1)
    for f in submit_states(tight, alone, fresh(states[:3])):
        f.result(timeout=10)
    assert [len(g) for g in groups(alone)] == [1, 1, 1]


def test_batching_off_decodes_one_by_one(samplers: list[StepLoopSampler]) -> None:
    for max_batch, budget in ((1, None), (8, 0)):
        sampler = new_sampler(samplers, max_batch=max_batch, decode_pixel_budget=budget)
        pipeline = BatchDecodeToy()
        states = [make_state(f"j{i}", seed=i, size=2, steps=2) for i in range(3)]
        got = [f.result(timeout=10) for f in submit_states(sampler, pipeline, fresh(states))]
        assert got == [solo_render(s) for s in fresh(states)]
        assert [len(g) for g in groups(pipeline)] == [1, 1, 1]
        assert sampler.stats()["batchedDecodes"] == 0


@pytest.mark.parametrize("phases", ["caller", "loop"])
def test_a_failing_batched_decode_falls_back_so_only_the_bad_job_fails(
    samplers: list[StepLoopSampler], phases: PhasePlacement
) -> None:
    sampler = new_sampler(samplers, phases=phases)
    pipeline = BatchDecodeToy()
    pipeline.fail_decode_for = {"bad"}
    states = [
        make_state("good1", seed=1, size=2, steps=2),
        make_state("bad", seed=2, size=2, steps=2),
        make_state("good2", seed=3, size=2, steps=2),
    ]
    futures = submit_states(sampler, pipeline, fresh(states))

    with pytest.raises(ValueError, match="decode failed for bad"):
        futures[1].result(timeout=10)
    good = [futures[0].result(timeout=10), futures[2].result(timeout=10)]
    assert good == [solo_render(s) for s in fresh([states[0], states[2]])]
    # The batched call, then each job on its own.
    assert groups(pipeline) == [{"good1", "bad", "good2"}, {"good1"}, {"bad"}, {"good2"}]
    assert sampler.stats()["batchedDecodes"] == 0


@pytest.mark.parametrize("phases", ["caller", "loop"])
def test_a_job_cancelled_while_waiting_for_its_decode_is_cancelled_alone(
    samplers: list[StepLoopSampler], phases: PhasePlacement
) -> None:
    sampler = new_sampler(samplers, phases=phases)
    pipeline = BatchDecodeToy()
    # "first" (another size) is decoded first; while it is, "victim" is cancelled in the queue.
    states = [
        make_state("first", seed=1, size=1, steps=2),
        make_state("x", seed=2, size=2, steps=2),
        make_state("victim", seed=3, size=2, steps=2),
        make_state("y", seed=4, size=2, steps=2),
    ]
    jobs = [make_job(pipeline, s) for s in states]

    def cancel_victim(decoding: Sequence[ToyState]) -> None:
        if [s.name for s in decoding] == ["first"]:
            jobs[2].cancel.cancel("user")

    pipeline.before_decode.append(cancel_victim)
    futures = submit_together(sampler, pipeline, jobs)

    with pytest.raises(Cancelled):
        futures[2].result(timeout=10)
    got = [futures[i].result(timeout=10) for i in (0, 1, 3)]
    assert got == [solo_render(s) for s in fresh([states[0], states[1], states[3]])]
    assert groups(pipeline) == [{"first"}, {"x", "y"}]
