"""The worker group on 2 gloo ranks with a light collective runner, one group for the module (a
start costs seconds; the tests run in file order): handshake, jobs, progress, cancellation and job
errors on the first group; then the faults that take a group down (a rank out of step, a rank
killed, a rank crashed, a rank hung), each detected, named by the first rank to fail, torn down
before the error is raised, and rebuilt by the next job, which is retried once on a fresh group;
and a clean close of the last group.

(Detection latency is measured in bench/parallel_overhead.py; tests assert behaviour, not time.)
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Iterator

import pytest
from parallel_support import alive, group_children, group_config, group_pids, wait_gone

from inline_core.errors import Cancelled
from inline_core.parallel.errors import RemoteJobError, WorkerGroupError, WorkerStartError
from inline_core.parallel.group import WorkerGroup
from inline_core.runtime.cancel import CancelToken

pytestmark = pytest.mark.worker_group  # starts groups of its own


@pytest.fixture(scope="module")
def group() -> Iterator[WorkerGroup]:
    g = WorkerGroup(group_config(heartbeat_timeout_s=2.0))
    yield g
    pids = group_pids(g)
    g.close()
    assert wait_gone(pids) == []
    assert group_children() == []  # nothing of any group left below the test process


def test_start_handshake_reports_every_rank(group: WorkerGroup) -> None:
    info = group.start()
    assert info["runner"] == "collective"
    assert info["worldSize"] == 2 and info["backend"] == "gloo"
    pids = group.pids()
    assert sorted(pids["ranks"]) == [0, 1]
    assert len(alive(group_pids(group))) == 3  # launcher + 2 ranks
    assert group.start() == info and group.launches == 1  # started once, lazily


def test_a_job_runs_on_every_rank_with_progress(group: WorkerGroup) -> None:
    events: list[object] = []
    reply = group.submit(
        {"steps": 3},
        {"payload": b"abcdef"},
        on_phase=events.append,
        on_step=lambda step, count: events.append((step, count)),
    )
    assert events == ["sample", (1, 3), (2, 3), (3, 3)]
    # Each step all-reduced 1 + 2 across the two ranks.
    assert reply.meta[0]["total"] == reply.meta[1]["total"] == 9.0
    rank_pids = set(group.pids()["ranks"].values())
    assert {int(str(reply.meta[r]["pid"])) for r in (0, 1)} == rank_pids
    assert bytes(reply.arrays["echo"]) == b"fedcba"
    assert reply.arrays["ranks"].tolist() == [0, 1]
    assert isinstance(reply.meta[0]["computeS"], float)


def test_cancel_reaches_every_rank_at_a_step(group: WorkerGroup) -> None:
    token = CancelToken()
    steps: list[int] = []

    def on_step(step: int, count: int) -> None:
        steps.append(step)
        token.cancel("user cancelled")

    before = group.pids()
    with pytest.raises(Cancelled, match="user cancelled"):
        group.submit({"steps": 200, "stepS": 0.05}, cancel=token, on_step=on_step)
    assert 1 <= len(steps) < 200
    # The group stays up and keeps the same ranks.
    assert group.pids() == before
    assert group.submit({"steps": 1}).meta[0]["total"] == 3.0


def test_a_job_error_on_every_rank_keeps_the_group(group: WorkerGroup) -> None:
    before = group.pids()
    with pytest.raises(RemoteJobError, match="failed at step 1") as caught:
        group.submit({"steps": 2, "failRank": "all"})
    assert caught.value.code == "run_failed"
    assert group.pids() == before
    assert group.submit({"steps": 1}).meta[1]["total"] == 3.0


def test_a_failing_callback_stops_the_job(group: WorkerGroup) -> None:
    def on_step(step: int, count: int) -> None:
        raise RuntimeError("reporter is gone")

    with pytest.raises(RuntimeError, match="reporter is gone"):
        group.submit({"steps": 100, "stepS": 0.05}, on_step=on_step)
    assert group.submit({"steps": 1}).meta[0]["total"] == 3.0


def test_an_error_on_one_rank_restarts_the_group(group: WorkerGroup) -> None:
    old = group_pids(group)
    # Rank 1 raises while rank 0 waits for it in the step's all-reduce: the ranks are out of step.
    with pytest.raises(RemoteJobError, match="rank 1 failed at step 1") as caught:
        group.submit({"steps": 3, "failRank": 1})
    assert "restarted" in caught.value.message
    assert alive(old) == []  # torn down before the error reached us
    reply = group.submit({"steps": 2}, {"payload": b"xy"})
    assert group.launches == 2
    assert bytes(reply.arrays["echo"]) == b"yx"
    assert set(group_pids(group)).isdisjoint(old)


def test_a_killed_rank_fails_the_job_and_leaves_nothing(group: WorkerGroup) -> None:
    group.start()  # the group rebuilt after the previous fault
    old = group_pids(group)
    rank1 = group.pids()["ranks"][1]

    def on_step(step: int, count: int) -> None:
        if step == 1:
            os.kill(rank1, signal.SIGKILL)

    with pytest.raises(WorkerGroupError) as caught:  # 200 steps of 50 ms: killed long before
        group.submit({"steps": 200, "stepS": 0.05}, on_step=on_step)
    assert caught.value.code == "worker_group_failed" and caught.value.status == 503
    assert "rank 1" in caught.value.message or "exited" in caught.value.message
    assert alive(old) == []
    assert group_children() == []


def test_a_crashed_rank_names_its_last_words_and_logs_the_group_log(
    group: WorkerGroup, caplog: pytest.LogCaptureFixture
) -> None:
    group.start()
    with pytest.raises(RemoteJobError):  # an earlier job's error stays in the group's log...
        group.submit({"steps": 2, "failRank": "all"})
    with caplog.at_level(logging.WARNING, logger="inline_core.parallel.session"):
        with pytest.raises(WorkerGroupError) as caught:  # a crash is not retried as a hang is
            group.submit({"steps": 200, "stepS": 0.05, "crashRank": 1})
    assert "rank 1" in caught.value.message or "exited" in caught.value.message
    assert "RuntimeError: rank 1 crashed in a collective" in caught.value.message
    assert "ValueError" not in caught.value.message  # ...but is not taken for this one's cause
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "--- group log (end) ---" in logged
    assert "[rank 1] RuntimeError: rank 1 crashed in a collective" in logged  # told apart
    assert group_children() == []


def test_the_first_rank_to_fail_is_named_though_a_peer_wrote_an_error_after_it(
    group: WorkerGroup, caplog: pytest.LogCaptureFixture
) -> None:
    group.start()
    # Rank 0 writes an error line after rank 1's last words and before rank 1 dies, then fails
    # with a reset connection: both later than rank 1's crash, and neither is its cause.
    job = {"steps": 200, "stepS": 0.05, "crashRank": 1, "peersWriteLater": True}
    with caplog.at_level(logging.WARNING, logger="inline_core.parallel.session"):
        with pytest.raises(WorkerGroupError) as caught:
            group.submit(job)
    message = caught.value.message
    assert "rank 1" in message and "RuntimeError: rank 1 crashed in a collective" in message
    assert "wrote this after" not in message and "Connection" not in message
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "[rank 1] RuntimeError: rank 1 crashed in a collective" in logged
    assert "[rank 0] RuntimeError: rank 0 wrote this after rank 1's last words" in logged
    assert group_children() == []


def test_a_rank_gone_without_a_word_beside_one_that_left_some_names_those_words(
    group: WorkerGroup,
) -> None:
    group.start()
    # Both ranks die at once, only rank 1 with last words: whichever close the server sees first,
    # the error carries rank 1's words (it once said only "rank 0 closed its connection").
    job = {"steps": 200, "stepS": 0.05, "crashRank": 1, "peersDieSilently": True}
    with pytest.raises(WorkerGroupError) as caught:
        group.submit(job)
    assert "RuntimeError: rank 1 crashed in a collective" in caught.value.message
    assert group_children() == []


def test_a_hung_rank_is_found_and_its_job_retried_on_a_fresh_group(group: WorkerGroup) -> None:
    stopped: list[int] = []
    launches = group.launches

    def on_step(step: int, count: int) -> None:
        if step == 1 and not stopped:  # only in the first attempt
            stopped.append(group.pids()["ranks"][1])
            os.kill(stopped[0], signal.SIGSTOP)

    reply = group.submit(
        {"steps": 50, "stepS": 0.02}, {"payload": b"ok"}, on_step=on_step, retries=1
    )
    assert bytes(reply.arrays["echo"]) == b"ko"
    assert reply.meta[0]["total"] == 150.0
    assert group.retried == 1
    assert group.launches == launches + 2  # the group the job found down, then its retry
    failure = group.last_failure or ""
    assert f"rank 1 (pid {stopped[0]}) sent no heartbeat" in failure
    assert "hung or stopped" in failure
    assert alive(stopped) == []  # the stopped rank too


def test_another_pipeline_loads_into_the_running_ranks(group: WorkerGroup) -> None:
    group.start()
    ranks, launches = dict(group.pids()["ranks"]), group.launches
    group.load({"name": "second"})
    assert group.pids()["ranks"] == ranks and group.launches == launches  # the same processes
    assert group.loads == 1 and group.stats()["loads"] == 1
    assert group.start()["loaded"] == "second"  # rank 0's description of what it holds now
    reply = group.submit({"steps": 2}, {"payload": b"ab"})
    assert reply.meta[0]["loaded"] == reply.meta[1]["loaded"] == "second"
    assert reply.meta[0]["total"] == 6.0 and bytes(reply.arrays["echo"]) == b"ba"
    assert sorted(int(str(reply.meta[rank]["pid"])) for rank in (0, 1)) == sorted(ranks.values())


def test_a_pipeline_the_ranks_cannot_load_ends_the_group_as_a_failed_start(
    group: WorkerGroup,
) -> None:
    group.start()
    pids, launches = group_pids(group), group.launches
    with pytest.raises(WorkerStartError, match="FileNotFoundError: no model at /nowhere"):
        group.load({"failToLoad": "/nowhere"})
    assert alive(pids) == []  # torn down before the error reached us
    assert "no model at /nowhere" in str(group.stats()["lastFailure"])
    group.load({"name": "third"})  # no group running: the next job starts one with it
    reply = group.submit({"steps": 1})
    assert reply.meta[0]["loaded"] == "third" and group.launches == launches + 1


def test_close_stops_the_group_cleanly(group: WorkerGroup) -> None:
    pids = group_pids(group)
    assert len(alive(pids)) == 3
    group.close()
    assert group.last_exit_code == 0  # every rank left through the shutdown message
    assert alive(pids) == []
    assert group.stats()["state"] == "closed"
