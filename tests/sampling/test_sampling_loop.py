"""The step loop end to end on a real (pure Python) pipeline: results, grouping, isolation."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

import pytest
from sampling_toy import (
    Callers,
    ToyPipeline,
    ToyState,
    fresh,
    make_job,
    make_state,
    solo_render,
    wait_until,
)

from inline_core.errors import Cancelled, Unavailable
from inline_core.sampling import StepLoopSampler


def new_sampler(made: list[StepLoopSampler], *args: Any, **kwargs: Any) -> StepLoopSampler:
    sampler = StepLoopSampler(*args, **kwargs)
    made.append(sampler)
    return sampler


def hold_first_forward(pipeline: ToyPipeline) -> threading.Event:
    """Park the loop inside its first forward until the test releases it."""
    release = threading.Event()
    pipeline.before_forward.append(lambda _states: release.wait(10.0))
    return release


def wait_all_queued(sampler: StepLoopSampler, pipeline: ToyPipeline, count: int) -> None:
    """With the loop parked in its first forward: wait until all `count` jobs are in the loop."""

    def ready() -> bool:
        stats = sampler.stats()
        return (
            bool(pipeline.batches)
            and stats["encodingJobs"] == 0
            and stats["activeJobs"] + stats["queuedJobs"] == count
        )

    wait_until(ready, "all jobs queued")


def submit_held(
    sampler: StepLoopSampler, pipeline: ToyPipeline, states: Sequence[ToyState]
) -> tuple[list[Future[Any]], threading.Event]:
    """Submit all, with the loop held in its first forward until all are queued."""
    release = hold_first_forward(pipeline)
    futures = [sampler.submit(make_job(pipeline, s)) for s in states]
    wait_all_queued(sampler, pipeline, len(states))
    return futures, release


MIXED = [
    make_state("a", seed=1, size=2, steps=4),
    make_state("b", seed=2, size=3, steps=6, prompt="a dog"),
    make_state("c", seed=3, size=1, steps=1),
    make_state("d", seed=4, size=4, steps=8, prompt="a tree"),
    make_state("e", seed=1, size=2, steps=5),
    make_state("f", seed=9, size=2, steps=3, prompt="sea"),
]


def test_a_lone_job_equals_its_solo_render(samplers: list[StepLoopSampler]) -> None:
    sampler = new_sampler(samplers)
    pipeline = ToyPipeline()
    state = make_state("solo", seed=7, size=3, steps=5)
    phases: list[str] = []
    steps: list[tuple[int, int]] = []
    job = make_job(pipeline, state)
    job.on_phase = phases.append
    job.on_step = lambda step, count: steps.append((step, count))

    assert sampler.run(job) == solo_render(make_state("solo", seed=7, size=3, steps=5))
    assert phases == ["encode", "sample", "decode"]
    assert steps == [(i, 5) for i in range(1, 6)]
    assert pipeline.batches == [("solo",)] * 5


def test_batched_results_equal_solo_renders(samplers: list[StepLoopSampler]) -> None:
    sampler = new_sampler(samplers, max_batch=8, token_budget=10_000)
    pipeline = ToyPipeline()
    futures, release = submit_held(sampler, pipeline, fresh(MIXED))
    release.set()

    results = [f.result(timeout=10) for f in futures]

    assert results == [solo_render(s) for s in fresh(MIXED)]
    # The held first forward may already hold several jobs (the loop can admit more than one
    # before it parks); the next forward holds every job still live, whatever that first one was.
    first, second = pipeline.batches[0], pipeline.batches[1]
    finished_in_first = {s.name for s in MIXED if s.steps == 1 and s.name in first}
    assert set(second) == {s.name for s in MIXED} - finished_in_first
    stats = sampler.stats()
    assert stats["completedJobs"] == len(MIXED)
    assert stats["batchedForwards"] > 0
    assert stats["forwardSeconds"] > 0  # the model's share of the time, for benches and health


def test_jobs_arriving_mid_way_join_and_still_equal_solo(samplers: list[StepLoopSampler]) -> None:
    sampler = new_sampler(samplers, max_batch=4, token_budget=10_000, phases="loop")
    pipeline = ToyPipeline()
    late = [
        make_state("late1", seed=11, size=2, steps=3),
        make_state("late2", seed=12, size=3, steps=7, prompt="x"),
        make_state("late3", seed=13, size=1, steps=2),
    ]
    late_futures: list[Future[Any]] = []

    def arrive(states: Sequence[ToyState]) -> None:
        # Deterministic arrivals: at given steps of the first job, from inside the loop.
        first = next((s for s in states if s.name == "first"), None)
        if first is not None and first.step_index in (2, 4, 5) and len(late_futures) < 3:
            late_futures.append(sampler.submit(make_job(pipeline, late[len(late_futures)])))

    pipeline.before_forward.append(arrive)
    first = make_state("first", seed=10, size=2, steps=12)
    result = sampler.run(make_job(pipeline, first))
    late_results = [f.result(timeout=10) for f in late_futures]

    assert result == solo_render(make_state("first", seed=10, size=2, steps=12))
    assert late_results == [solo_render(s) for s in fresh(late)]
    assert any(len(b) > 1 and "first" in b for b in pipeline.batches)  # joined the running job


def test_grouping_respects_max_batch(samplers: list[StepLoopSampler]) -> None:
    sampler = new_sampler(samplers, max_batch=3, token_budget=10_000)
    pipeline = ToyPipeline()
    states = [make_state(f"j{i}", seed=i, steps=3) for i in range(7)]
    futures, release = submit_held(sampler, pipeline, states)
    release.set()
    results = [f.result(timeout=10) for f in futures]

    assert results == [solo_render(s) for s in fresh(states)]
    assert max(len(b) for b in pipeline.batches) == 3
    assert all(len(b) <= 3 for b in pipeline.batches)


def test_max_batch_one_never_batches_and_gives_the_same_results(
    samplers: list[StepLoopSampler],
) -> None:
    sampler = new_sampler(samplers, max_batch=1)
    pipeline = ToyPipeline()
    futures, release = submit_held(sampler, pipeline, fresh(MIXED))
    release.set()
    results = [f.result(timeout=10) for f in futures]

    assert results == [solo_render(s) for s in fresh(MIXED)]
    assert all(len(b) == 1 for b in pipeline.batches)
    assert sampler.stats()["batchedForwards"] == 0
    assert sampler.stats()["batching"] is False


def test_token_budget_bounds_a_forward_and_a_large_job_runs_alone(
    samplers: list[StepLoopSampler],
) -> None:
    sampler = new_sampler(samplers, max_batch=16, token_budget=10)
    pipeline = ToyPipeline()
    states = [
        make_state("big", seed=1, size=5, steps=3),  # 25 tokens: over the budget on its own
        *[make_state(f"s{i}", seed=10 + i, size=2, steps=3) for i in range(5)],  # 4 tokens each
    ]
    futures, release = submit_held(sampler, pipeline, states)
    release.set()
    results = [f.result(timeout=10) for f in futures]

    assert results == [solo_render(s) for s in fresh(states)]
    for names, tokens in zip(pipeline.batches, pipeline.batch_tokens, strict=True):
        assert tokens <= 10 or len(names) == 1
        if "big" in names:
            assert names == ("big",)
    assert max(len(b) for b in pipeline.batches) == 2  # two 4-token jobs fit, three do not


def test_incompatible_jobs_never_share_a_forward(samplers: list[StepLoopSampler]) -> None:
    sampler = new_sampler(samplers, max_batch=8, token_budget=10_000)
    pipe_a, pipe_b = ToyPipeline("a"), ToyPipeline("b")
    release = hold_first_forward(pipe_a)
    jobs = [
        make_job(pipe_a, make_state("a-plain-1", seed=1)),
        make_job(pipe_a, make_state("a-cfg-1", seed=2, cfg=True)),
        make_job(pipe_a, make_state("a-plain-2", seed=3)),
        make_job(pipe_b, make_state("b-plain-1", seed=4)),
        make_job(pipe_a, make_state("a-cfg-2", seed=5, cfg=True)),
    ]
    futures = [sampler.submit(j) for j in jobs]
    wait_until(
        lambda: (
            bool(pipe_a.batches)
            and sampler.stats()["encodingJobs"] == 0
            and sampler.stats()["activeJobs"] + sampler.stats()["queuedJobs"] == len(jobs)
        ),
        "all jobs queued",
    )
    release.set()
    results = [f.result(timeout=10) for f in futures]

    expected = [solo_render(fresh([j.state])[0]) for j in jobs]
    assert results == expected
    for names in pipe_a.batches:  # CFG and plain never mixed
        assert len({"cfg" in n for n in names}) == 1
    assert all(n.startswith("b-") for b in pipe_b.batches for n in b)
    assert ("a-plain-1", "a-plain-2") in pipe_a.batches or ("a-plain-2", "a-plain-1") in (
        pipe_a.batches
    )


def test_cancel_inside_a_batch_leaves_the_others_intact(samplers: list[StepLoopSampler]) -> None:
    sampler = new_sampler(samplers, max_batch=8, token_budget=10_000)
    pipeline = ToyPipeline()
    states = fresh(MIXED)
    jobs = [make_job(pipeline, s) for s in states]
    victim = jobs[3]  # "d": 8 steps

    def cancel_at_step_two(batch: Sequence[ToyState]) -> None:
        if any(s.name == "d" and s.step_index == 2 for s in batch):
            victim.cancel.cancel("user cancelled")

    release = hold_first_forward(pipeline)
    pipeline.before_forward.append(cancel_at_step_two)
    futures = [sampler.submit(j) for j in jobs]
    wait_all_queued(sampler, pipeline, len(jobs))
    release.set()

    with pytest.raises(Cancelled, match="user cancelled"):
        futures[3].result(timeout=10)
    others = [f.result(timeout=10) for i, f in enumerate(futures) if i != 3]
    assert others == [solo_render(s) for i, s in enumerate(fresh(MIXED)) if i != 3]
    assert states[3].step_index == 3  # the step in flight finished, then it left
    assert sum("d" in b for b in pipeline.batches) == 3
    assert sampler.stats()["cancelledJobs"] == 1


def test_a_job_cancelled_before_it_starts_raises_cancelled(
    samplers: list[StepLoopSampler],
) -> None:
    sampler = new_sampler(samplers)
    pipeline = ToyPipeline()
    job = make_job(pipeline, make_state("early", seed=1))
    job.cancel.cancel()
    with pytest.raises(Cancelled):
        sampler.run(job)
    assert pipeline.batches == []


def test_a_failing_forward_fails_its_group_only(samplers: list[StepLoopSampler]) -> None:
    sampler = new_sampler(samplers, max_batch=8, token_budget=10_000)
    pipeline = ToyPipeline()
    pipeline.fail_forward_when = lambda states: any(s.cfg for s in states)
    states = [
        make_state("plain1", seed=1),
        make_state("cfg1", seed=2, cfg=True),
        make_state("plain2", seed=3),
        make_state("cfg2", seed=4, cfg=True),
    ]
    futures, release = submit_held(sampler, pipeline, states)
    release.set()

    for i in (1, 3):
        with pytest.raises(RuntimeError, match="forward failed"):
            futures[i].result(timeout=10)
    assert [futures[i].result(timeout=10) for i in (0, 2)] == [
        solo_render(s) for s in fresh([states[0], states[2]])
    ]
    # The loop survives: a later job still runs.
    later = make_state("later", seed=5)
    assert sampler.run(make_job(pipeline, later)) == solo_render(make_state("later", seed=5))


def test_a_failing_scheduler_encode_or_decode_fails_only_that_job(
    samplers: list[StepLoopSampler],
) -> None:
    for phases in ("caller", "loop"):
        sampler = new_sampler(samplers, max_batch=8, token_budget=10_000, phases=phases)
        pipeline = ToyPipeline()
        pipeline.fail_step_for = {"bad-step"}
        pipeline.fail_decode_for = {"bad-decode"}
        pipeline.fail_encode_for = {"bad-encode"}
        states = [
            make_state("good1", seed=1),
            make_state("bad-step", seed=2),
            make_state("bad-decode", seed=3),
            make_state("bad-encode", seed=4),
            make_state("good2", seed=5, steps=6),
        ]
        futures = [sampler.submit(make_job(pipeline, s)) for s in states]

        for i, message in ((1, "scheduler"), (2, "decode"), (3, "encode")):
            with pytest.raises(ValueError, match=message):
                futures[i].result(timeout=10)
        good = [futures[0].result(timeout=10), futures[4].result(timeout=10)]
        assert good == [solo_render(s) for s in fresh([states[0], states[4]])]
        assert sampler.stats()["failedJobs"] >= 1


def test_sixteen_concurrent_callers_all_finish(samplers: list[StepLoopSampler]) -> None:
    sampler = new_sampler(samplers, max_batch=8, token_budget=64)
    pipeline = ToyPipeline()
    states = [
        make_state(f"r{i}", seed=100 + i, size=1 + i % 3, steps=2 + i % 5, prompt=f"p{i % 4}")
        for i in range(16)
    ]
    callers = Callers(sampler, pipeline, states)
    callers.join(20)

    assert callers.results == {s.name: solo_render(s) for s in fresh(states)}
    stats = sampler.stats()
    assert stats["completedJobs"] == 16
    assert stats["activeJobs"] == 0 and stats["queuedJobs"] == 0


def test_a_long_job_does_not_starve_a_new_one(samplers: list[StepLoopSampler]) -> None:
    # Batching off, so the newcomer cannot just ride along: it has to get turns of its own.
    sampler = new_sampler(samplers, max_batch=1, phases="loop")
    pipeline = ToyPipeline()
    newcomer: list[Future[Any]] = []

    def arrive(states: Sequence[ToyState]) -> None:
        if states[0].name == "long" and states[0].step_index == 3 and not newcomer:
            newcomer.append(sampler.submit(make_job(pipeline, make_state("new", seed=2, steps=4))))

    pipeline.before_forward.append(arrive)
    long_state = make_state("long", seed=1, steps=40)
    long_future = sampler.submit(make_job(pipeline, long_state))
    wait_until(lambda: bool(newcomer), "the newcomer")
    newcomer[0].result(timeout=10)
    assert long_future.result(timeout=10) == solo_render(make_state("long", seed=1, steps=40))

    order = [b[0] for b in pipeline.batches]
    last_new = max(i for i, name in enumerate(order) if name == "new")
    assert order.count("new") == 4
    assert last_new < 4 + 2 * 4 + 1  # the two alternate: the newcomer is done long before step 40


def test_phases_run_off_the_loop_by_default_and_on_it_when_serial(
    samplers: list[StepLoopSampler],
) -> None:
    default = new_sampler(samplers)
    pipeline = ToyPipeline()
    default.run(make_job(pipeline, make_state("x", seed=1)))
    assert pipeline.encode_threads == [threading.current_thread().name]
    assert pipeline.decode_threads == [threading.current_thread().name]

    serial = ToyPipeline()
    serial.serial_phases = True
    out = default.run(make_job(serial, make_state("y", seed=2)))
    assert out == solo_render(make_state("y", seed=2))
    assert serial.encode_threads == ["inline-step-loop"]
    assert serial.decode_threads == ["inline-step-loop"]


def test_stats_report_limits_and_counts(samplers: list[StepLoopSampler]) -> None:
    sampler = new_sampler(samplers, max_batch=4, token_budget=512)
    stats = sampler.stats()
    assert stats["maxBatch"] == 4 and stats["tokenBudget"] == 512
    assert stats["activeJobs"] == 0 and stats["queuedJobs"] == 0
    pipeline = ToyPipeline()
    release = hold_first_forward(pipeline)
    futures = [sampler.submit(make_job(pipeline, make_state(f"s{i}", seed=i))) for i in range(3)]
    wait_all_queued(sampler, pipeline, 3)
    release.set()
    for f in futures:
        f.result(timeout=10)
    stats = sampler.stats()
    assert stats["completedJobs"] == 3 and stats["activeJobs"] == 0
    assert stats["forwards"] >= 4 and stats["meanBatch"] > 1.0


def test_close_fails_pending_jobs_and_refuses_new_ones() -> None:
    sampler = StepLoopSampler(max_batch=4)
    pipeline = ToyPipeline()
    release = threading.Event()
    entered = threading.Event()

    def park(_states: Sequence[ToyState]) -> None:
        entered.set()
        release.wait(10.0)

    pipeline.before_forward.append(park)
    running = sampler.submit(make_job(pipeline, make_state("running", seed=1, steps=50)))
    entered.wait(10.0)
    queued = sampler.submit(make_job(pipeline, make_state("queued", seed=2)))
    wait_until(lambda: sampler.stats()["encodingJobs"] == 0, "queued job enqueued")

    closer = threading.Thread(target=sampler.close)
    closer.start()
    wait_until(lambda: sampler.stats()["closed"] is True, "closing")
    release.set()
    closer.join(timeout=10)

    for future in (running, queued):
        with pytest.raises(Unavailable):
            future.result(timeout=10)
    with pytest.raises(Unavailable):
        sampler.run(make_job(pipeline, make_state("after", seed=3)))
    with pytest.raises(Unavailable):
        sampler.submit(make_job(pipeline, make_state("after2", seed=4))).result(timeout=10)


class _Incomparable:
    """A batch key whose comparison raises: a fault in the loop's own grouping step."""

    def __eq__(self, other: object) -> bool:
        raise TypeError("cannot compare these keys")

    def __hash__(self) -> int:
        return 0


class _IncomparableState(ToyState):
    @property
    def batch_key(self) -> Any:
        return _Incomparable()


def test_a_fault_in_grouping_fails_the_jobs_held_and_the_loop_goes_on(
    samplers: list[StepLoopSampler],
) -> None:
    sampler = new_sampler(samplers, max_batch=4, phases="loop")
    pipeline = ToyPipeline()
    release = hold_first_forward(pipeline)
    first = sampler.submit(make_job(pipeline, _IncomparableState("x", seed=1, size=1, steps=3)))
    wait_until(lambda: bool(pipeline.batches), "the first forward")
    second = sampler.submit(make_job(pipeline, _IncomparableState("y", seed=2, size=1, steps=3)))
    release.set()
    for future in (first, second):
        with pytest.raises(TypeError, match="cannot compare"):
            future.result(timeout=10)
    after = make_state("after", seed=3)
    assert sampler.run(make_job(pipeline, after)) == solo_render(make_state("after", seed=3))
