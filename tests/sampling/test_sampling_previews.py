"""Step previews in the sampler: handed off the loop to one worker, newest wins, never a backlog,
never a failed job, and nothing at all when a job has them off (pure Python toy pipeline)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest
from sampling_toy import PreviewToy, ToyPipeline, make_job, make_state, solo_render, wait_until

from inline_core.sampling import StepLoopSampler
from inline_core.sampling.previews import PreviewWorker


class Delivered:
    """What a channel delivered: (rendered value, step, step count, rendering thread)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: list[tuple[Any, int, int, str]] = []

    def __call__(self, image: Any, step: int, step_count: int) -> None:
        with self.lock:
            self.items.append((image, step, step_count, threading.current_thread().name))

    @property
    def steps(self) -> list[int]:
        with self.lock:
            return [step for _image, step, _count, _thread in self.items]


def as_tuple(latents: Any, latent_format: str) -> tuple[str, tuple[float, ...]]:
    return latent_format, tuple(latents)


def blocked_render() -> tuple[Any, threading.Event, threading.Event]:
    """A render that says it started, then waits for the test to release it."""
    started, release = threading.Event(), threading.Event()

    def slow(latents: Any, latent_format: str) -> Any:
        started.set()
        release.wait(30.0)
        return latents

    return slow, started, release


@pytest.fixture
def worker() -> Iterator[PreviewWorker]:
    w = PreviewWorker()
    yield w
    w.close()


@pytest.fixture
def sampler() -> Iterator[StepLoopSampler]:
    s = StepLoopSampler()
    yield s
    s.close()


def test_previews_arrive_in_step_order_rendered_off_the_loop(
    sampler: StepLoopSampler, worker: PreviewWorker
) -> None:
    pipeline = PreviewToy()
    delivered = Delivered()
    job = make_job(pipeline, make_state("a", seed=1, steps=5))
    job.preview = worker.channel(as_tuple, delivered)
    sampler.run(job)
    assert worker.wait_idle(30.0)
    steps = delivered.steps
    # One per step, or coalesced when the worker fell behind: in order, ending on the last step.
    assert steps == sorted(set(steps)) and steps[-1] == 5
    counters = worker.counters
    assert counters.offered == 5 == pipeline.preview_calls
    assert counters.rendered + counters.dropped == counters.offered == len(steps) + counters.dropped
    first_format, first_values = delivered.items[0][0]
    assert first_format == "toy" and len(first_values) == 4
    assert {thread for *_rest, thread in delivered.items} == {"inline-previews"}
    assert sampler.stats()["previewSeconds"] > 0.0  # the loop's share: the hand-overs


def test_previews_never_change_the_result(sampler: StepLoopSampler, worker: PreviewWorker) -> None:
    pipeline = PreviewToy()
    job = make_job(pipeline, make_state("a", seed=3, size=3, steps=6))
    job.preview = worker.channel(as_tuple, Delivered())
    assert sampler.run(job) == solo_render(make_state("a", seed=3, size=3, steps=6))


def test_previews_off_cost_no_call(sampler: StepLoopSampler) -> None:
    pipeline = PreviewToy()
    result = sampler.run(make_job(pipeline, make_state("a", seed=1, steps=4)))
    assert result == solo_render(make_state("a", seed=1, steps=4))
    assert pipeline.preview_calls == 0
    assert sampler.stats()["previewSeconds"] == 0.0  # not one clock read on the loop for them


def test_a_pipeline_without_previews_renders_with_them_asked(
    sampler: StepLoopSampler, worker: PreviewWorker
) -> None:
    delivered = Delivered()
    job = make_job(ToyPipeline(), make_state("a", seed=2, steps=3))
    job.preview = worker.channel(as_tuple, delivered)
    assert sampler.run(job) == solo_render(make_state("a", seed=2, steps=3))
    assert worker.counters.offered == 0 and delivered.items == []


def test_a_slow_render_keeps_only_the_newest_estimate(worker: PreviewWorker) -> None:
    slow, started, release = blocked_render()
    delivered = Delivered()
    channel = worker.channel(slow, delivered)
    channel.offer("x1", "toy", 1, 4)
    assert started.wait(30.0)  # the worker is inside the first render
    for step in (2, 3, 4):
        channel.offer(f"x{step}", "toy", step, 4)
    release.set()
    assert worker.wait_idle(30.0)
    assert [(image, step) for image, step, *_ in delivered.items] == [("x1", 1), ("x4", 4)]
    assert worker.counters.dropped == 2


def test_a_failing_preview_never_fails_the_job(
    sampler: StepLoopSampler, worker: PreviewWorker
) -> None:
    pipeline = PreviewToy()
    pipeline.fail_preview = True
    job = make_job(pipeline, make_state("a", seed=1, steps=3))
    job.preview = worker.channel(as_tuple, Delivered())
    assert sampler.run(job) == solo_render(make_state("a", seed=1, steps=3))

    def broken(latents: Any, latent_format: str) -> Any:
        raise RuntimeError("render failed")

    pipeline.fail_preview = False
    job = make_job(pipeline, make_state("b", seed=2, steps=3))
    job.preview = worker.channel(broken, Delivered())
    assert sampler.run(job) == solo_render(make_state("b", seed=2, steps=3))
    assert worker.wait_idle(30.0)
    assert worker.counters.failed >= 1 and worker.counters.rendered == 0


def test_previewed_jobs_still_share_one_forward(
    sampler: StepLoopSampler, worker: PreviewWorker
) -> None:
    pipeline = PreviewToy()
    release = threading.Event()
    pipeline.before_forward.append(lambda _states: release.wait(10.0))
    outputs: dict[str, Delivered] = {}
    futures: list[Future[Any]] = []
    for name, seed in (("a", 1), ("b", 2), ("c", 3)):
        job = make_job(pipeline, make_state(name, seed=seed, steps=4))
        outputs[name] = Delivered()
        job.preview = worker.channel(as_tuple, outputs[name])
        futures.append(sampler.submit(job))

    def all_in() -> bool:
        stats = sampler.stats()
        return stats["encodingJobs"] == 0 and stats["activeJobs"] + stats["queuedJobs"] == 3

    wait_until(all_in, "all three jobs in the loop")
    release.set()
    for future in futures:
        future.result(30.0)
    assert worker.wait_idle(30.0)
    # After the first forward (which may have started alone), the three run together.
    assert ("a", "b", "c") in pipeline.batches
    for delivered in outputs.values():
        assert delivered.steps[-1] == 4


def test_flush_waits_for_the_last_offer_to_be_delivered(worker: PreviewWorker) -> None:
    slow, started, release = blocked_render()
    delivered = Delivered()
    channel = worker.channel(slow, delivered)
    assert channel.flush(0.0)  # nothing offered: nothing to wait for
    channel.offer("x1", "toy", 1, 2)
    assert started.wait(30.0)
    channel.offer("x2", "toy", 2, 2)
    assert not channel.flush(0.01)  # rendering, and one more waiting
    release.set()
    assert channel.flush(30.0)
    assert delivered.steps == [1, 2]


def test_then_runs_after_the_last_delivery_without_making_its_caller_wait(
    worker: PreviewWorker,
) -> None:
    """A job's end that must follow its last preview (a worker group's result) is handed to the
    worker: the caller (the loop thread) goes on, and the action runs right after the last
    delivery, on the worker's thread; at once when nothing waits."""
    slow, started, release = blocked_render()
    delivered = Delivered()
    channel = worker.channel(slow, delivered)
    ran: list[tuple[list[int], str]] = []

    def record() -> None:
        ran.append((delivered.steps, threading.current_thread().name))

    channel.then(record)
    assert ran == [([], threading.current_thread().name)]  # nothing offered: at once, here
    ran.clear()
    channel.offer("x1", "toy", 1, 2)
    assert started.wait(30.0)
    channel.offer("x2", "toy", 2, 2)
    channel.then(record)  # returns while the worker renders
    assert ran == []
    release.set()
    assert worker.wait_idle(30.0)
    wait_until(lambda: bool(ran), "the action after the last delivery")
    assert ran == [([1, 2], "inline-previews")]


def test_then_still_runs_when_the_worker_closes_first() -> None:
    worker = PreviewWorker(duty=0.001)  # a long rest after the first render
    delivered = Delivered()
    channel = worker.channel(as_tuple, delivered)
    ran: list[str] = []
    slow, started, release = blocked_render()
    other = worker.channel(slow, Delivered())
    other.offer("y", "toy", 1, 1)
    assert started.wait(30.0)  # the worker is busy elsewhere
    channel.offer((1.0,), "toy", 1, 1)
    channel.then(lambda: ran.append("after"))
    assert ran == []
    threading.Timer(0.05, release.set).start()
    worker.close()
    assert ran == ["after"]  # a result waiting on a preview is never lost
