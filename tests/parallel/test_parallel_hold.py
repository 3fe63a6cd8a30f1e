"""Rank 0's hold (`Hold`, `WorkerGroup.gather`) on its own step loop, in this process: the jobs
sent after it share their forwards, and nothing the server sends during it (a job it refuses, a
`Shutdown` or a `Load`) leaves the loop waiting out the hold's time."""

from __future__ import annotations

import queue
import threading
from typing import Any

import numpy as np

from inline_core.device.split import ParallelSpec
from inline_core.parallel.collective import Command
from inline_core.parallel.engines import NoSplit
from inline_core.parallel.protocol import Failure, Hold, Job, Message, Result, Shutdown
from inline_core.parallel.runner import WorkerContext
from inline_core.parallel.step_runner import StepLoopRunner
from inline_core.parallel.wire import encode_fields
from tests.sampling.sampling_toy import ToyPipeline, ToyState

LONG_S = 600.0  # a hold no test waits out: one that does hangs until the join's timeout


class RankToy(ToyPipeline):
    """The sampler tests' toy as a rank rebuilds it from a job (`RankPipeline`)."""

    def request(self, **fields: Any) -> ToyState:
        return ToyState(**fields)

    def post_decode(self, state: ToyState, /) -> Any:
        return np.asarray(super().post_decode(state))


def _job(job_id: int, name: str) -> Job:
    request = encode_fields({"name": name, "seed": job_id, "size": 2, "steps": 3})
    return Job(job_id, request.params, request.blobs)


def _serve(
    pipeline: RankToy,
) -> tuple[queue.Queue[Message], queue.Queue[Message], threading.Thread]:
    context = WorkerContext(0, 1, 0, "cpu", ParallelSpec(), "auto")
    runner = StepLoopRunner(pipeline, context, NoSplit(), None, "toy")
    inbox: queue.Queue[Message] = queue.Queue()
    sent: queue.Queue[Message] = queue.Queue()

    def alone(command: Command) -> Command:
        return command

    serving = threading.Thread(
        target=runner.serve_leader, args=(inbox, sent.put, alone, 60.0), daemon=True
    )
    serving.start()
    return inbox, sent, serving


def _ends(sent: queue.Queue[Message], count: int) -> dict[int, Message]:
    ends: dict[int, Message] = {}
    while len(ends) < count:
        message = sent.get(timeout=60)
        if isinstance(message, Result | Failure):
            ends[message.job_id] = message
    return ends


def test_jobs_sent_after_a_hold_share_every_forward() -> None:
    pipeline = RankToy()
    inbox, sent, serving = _serve(pipeline)
    inbox.put(Hold(3, LONG_S))
    for job_id, name in ((1, "a"), (2, "b"), (3, "c")):
        inbox.put(_job(job_id, name))
    ends = _ends(sent, 3)
    inbox.put(Shutdown())
    serving.join(timeout=60)
    assert all(isinstance(end, Result) for end in ends.values()), ends
    assert pipeline.batches == [("a", "b", "c")] * 3


def test_a_job_refused_during_a_hold_counts_as_arrived() -> None:
    # Refused before the loop (its request does not rebuild): the hold must not wait for it.
    pipeline = RankToy()
    inbox, sent, serving = _serve(pipeline)
    inbox.put(Hold(2, LONG_S))
    inbox.put(Job(1, {}, {}))
    inbox.put(_job(2, "b"))
    ends = _ends(sent, 2)
    inbox.put(Shutdown())
    serving.join(timeout=60)
    assert isinstance(ends[1], Failure) and "carries no fields" in ends[1].message, ends[1]
    assert isinstance(ends[2], Result), ends[2]


def test_a_shutdown_during_a_hold_ends_it() -> None:
    # A `Load` reaches the runner as a `Shutdown` too (`worker._read_all`).
    inbox, _sent, serving = _serve(RankToy())
    inbox.put(Hold(2, LONG_S))
    inbox.put(_job(1, "a"))
    inbox.put(Shutdown())
    serving.join(timeout=60)
    assert not serving.is_alive()
