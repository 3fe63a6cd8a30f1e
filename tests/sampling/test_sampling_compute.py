"""`StepLoopSampler.compute`: a node's model work runs on the loop thread when the phases do (the
CPU server's one computing thread), on the caller's otherwise; the loop's start hook runs first."""

from __future__ import annotations

import threading
import time

import pytest

from inline_core.errors import Unavailable
from inline_core.sampling import StepLoopSampler
from inline_core.sampling.loop import PhasePlacement


def new_sampler(
    made: list[StepLoopSampler], phases: PhasePlacement, hook: list[str] | None = None
) -> StepLoopSampler:
    on_start = None if hook is None else (lambda: hook.append(threading.current_thread().name))
    sampler = StepLoopSampler(phases=phases, on_loop_start=on_start)
    made.append(sampler)
    return sampler


def test_with_phases_on_the_loop_compute_runs_on_the_loop_thread_after_its_start_hook(
    samplers: list[StepLoopSampler],
) -> None:
    started: list[str] = []
    sampler = new_sampler(samplers, "loop", started)

    def where() -> str:
        return f"{threading.current_thread().name} after {list(started)}"

    assert sampler.compute(where) == "inline-step-loop after ['inline-step-loop']"
    assert sampler.compute(where) == "inline-step-loop after ['inline-step-loop']"  # hook: once


def test_compute_from_the_loop_thread_itself_runs_at_once(
    samplers: list[StepLoopSampler],
) -> None:
    sampler = new_sampler(samplers, "loop")
    # Nested: a load on the loop that encodes on the loop must not wait for itself.
    inner = sampler.compute(lambda: sampler.compute(lambda: threading.current_thread().name))
    assert inner == "inline-step-loop"


def test_compute_hands_back_the_callers_exception_and_the_loop_goes_on(
    samplers: list[StepLoopSampler],
) -> None:
    sampler = new_sampler(samplers, "loop")

    def fails() -> None:
        raise ValueError("the encoder refused")

    with pytest.raises(ValueError, match="the encoder refused"):
        sampler.compute(fails)
    assert sampler.compute(lambda: 41 + 1) == 42


def test_with_phases_on_the_caller_compute_runs_where_it_is_called(
    samplers: list[StepLoopSampler],
) -> None:
    started: list[str] = []
    sampler = new_sampler(samplers, "caller", started)
    assert sampler.compute(lambda: threading.current_thread().name) == "MainThread"
    assert started == []  # no loop was started for it


def test_compute_on_a_closed_sampler_is_unavailable(samplers: list[StepLoopSampler]) -> None:
    sampler = new_sampler(samplers, "loop")
    sampler.close()
    with pytest.raises(Unavailable):
        sampler.compute(lambda: None)


def test_a_call_queued_behind_a_forward_fails_unavailable_when_the_sampler_closes(
    samplers: list[StepLoopSampler],
) -> None:
    sampler = new_sampler(samplers, "loop")
    busy, release = threading.Event(), threading.Event()
    parked = threading.Thread(
        target=lambda: sampler.compute(lambda: (busy.set(), release.wait(10.0)))
    )
    parked.start()
    assert busy.wait(10.0)  # the loop is inside the first call
    outcome: list[BaseException | str] = []

    def queued() -> None:
        try:
            outcome.append(sampler.compute(lambda: "ran"))
        except Unavailable as exc:
            outcome.append(exc)

    waiter = threading.Thread(target=queued)
    waiter.start()
    closer = threading.Thread(target=sampler.close)
    closer.start()
    deadline = time.monotonic() + 10.0
    while not sampler.stats()["closed"]:  # closed while the loop is still inside the first call
        assert time.monotonic() < deadline
        time.sleep(0.01)
    release.set()
    for thread in (parked, waiter, closer):
        thread.join(10.0)
    # Queued before the close or refused by it: the caller hears it will not run, and no one
    # waits forever.
    [result] = outcome
    assert isinstance(result, Unavailable)
