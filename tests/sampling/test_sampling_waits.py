"""A job that waits on the step loop for another render's forward is told what it waits for and
about how long (the real loop; a toy model whose forwards take over a second)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

from sampling_toy import ToyPipeline, ToyState, make_job, make_state

from inline_core.runtime.progress import NodeReporter, Progress, RunEvent
from inline_core.sampling import SampleJob, StepLoopSampler
from inline_core.sampling.waits import NOTICE_S, WAITING_FOR
from inline_core.server.run_state import NodeState, NodeStatus
from inline_core.server.serialize import progress_event

SLOW_FORWARD_S = NOTICE_S + 0.3  # the toy model's forward: long enough to be worth a word


def told(job: SampleJob, into: list[tuple[str, float]]) -> SampleJob:
    job.on_wait = lambda what, eta_s: into.append((what, eta_s))
    return job


def test_a_job_waiting_for_another_renders_forward_is_told_why_and_how_long() -> None:
    pipeline = ToyPipeline()
    sampler = StepLoopSampler(max_batch=4, phases="loop")
    slow_waits: list[tuple[str, float]] = []
    late_waits: list[tuple[str, float]] = []
    late: list[Future[Any]] = []
    arrived = threading.Event()

    def forward(states: Sequence[ToyState]) -> None:
        if states[0].name != "slow":
            return
        if states[0].step_index == 1 and not late:  # its second forward: its length is known
            # Another batch key (CFG on): it cannot join the slow render's forward.
            job = told(make_job(pipeline, make_state("late", 2, steps=2, cfg=True)), late_waits)
            late.append(sampler.submit(job))
            arrived.set()
        time.sleep(SLOW_FORWARD_S)  # the model at work (not a timing assertion)

    pipeline.before_forward.append(forward)
    try:
        slow = sampler.submit(told(make_job(pipeline, make_state("slow", 1, steps=4)), slow_waits))
        assert arrived.wait(60)
        late[0].result(timeout=60)
        slow.result(timeout=60)
    finally:
        sampler.close()
    assert late_waits, "the late job was never told why it waited"
    assert all(what == WAITING_FOR for what, _eta in late_waits)
    assert all(NOTICE_S <= eta <= 60 for _what, eta in late_waits)
    assert slow_waits == []  # the late job's forwards are short: not worth a word


def test_a_wait_reaches_the_run_status_and_its_events() -> None:
    events: list[RunEvent] = []
    reporter = NodeReporter("run-1", "img", events.append)
    reporter.step(3, 20)
    reporter.waiting(WAITING_FOR, 12.5)
    progress = events[-1]
    assert isinstance(progress, Progress) and progress.waiting_for == WAITING_FOR
    assert (progress.phase, progress.eta_ms) == ("waiting", 12500)
    node = NodeState(
        NodeStatus.RUNNING, 0.4, "waiting", 3, 20, progress.eta_ms, progress.waiting_for
    )
    assert NodeState.from_json(node.to_json()) == node  # stored and read back as it was
    assert node.to_json()["waitingFor"] == WAITING_FOR
    body = progress_event("run-1", "img", node, 0.4).body
    assert (body["phase"], body["waitingFor"], body["etaMs"]) == ("waiting", WAITING_FOR, 12500)
