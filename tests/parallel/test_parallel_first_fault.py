"""Naming the first rank to fail, without a group: the evidence's order (`FaultLog`), each rank's
own logs (`GroupLogs`), and what counts as a process gone. (With real ranks, crashes and
collateral errors: test_parallel_group.py.)
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

from inline_core.parallel.faults import FaultLog
from inline_core.parallel.group_logs import GroupLogs
from inline_core.parallel.launch import is_down, is_exiting


def test_a_peer_a_report_saw_gone_comes_first_however_late_the_server_saw_it() -> None:
    faults = FaultLog()
    caught = time.monotonic()
    # The server's threads get to rank 0's collateral report before they see rank 1's crash.
    faults.reported(0, caught, "RuntimeError: Connection reset by peer", peers_down=[1])
    faults.seen(1, "it closed its connection")
    first = faults.first()
    assert first is not None and first.rank == 1
    assert first.how == "it was gone when rank 0 failed" and first.message is None


def test_what_the_server_saw_first_comes_first() -> None:
    faults = FaultLog()
    faults.seen(1, "it closed its connection")
    faults.reported(0, time.monotonic(), "RuntimeError: Connection reset by peer", peers_down=[1])
    first = faults.first()
    assert first is not None and (first.rank, first.how) == (1, "it closed its connection")


def test_reports_are_ordered_by_when_the_ranks_caught_them_not_by_arrival() -> None:
    faults = FaultLog()
    now = time.monotonic()
    faults.reported(0, now, "ValueError: later", peers_down=[])
    faults.reported(1, now - 0.5, "ValueError: earlier", peers_down=[])
    first = faults.first()
    assert first is not None and (first.rank, first.message) == (1, "ValueError: earlier")
    faults.clear()  # a new job: nothing of the last one counts
    assert faults.first() is None


def test_a_rank_seen_down_keeps_the_error_it_reported_before() -> None:
    faults = FaultLog()
    faults.seen(0, "it closed its connection")
    faults.reported(0, time.monotonic() - 1.0, "ValueError: boom", peers_down=[])
    first = faults.first()
    assert first is not None and first.message == "ValueError: boom"
    assert first.how == "it reported an error"


def _rank_file(root: Path, rank: int, stream: str) -> Path:
    path = root / "ranks" / "none_x1y2" / "attempt_0" / str(rank) / f"{stream}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _append(path: Path, text: str) -> None:
    with path.open("a") as fh:
        fh.write(text)


def test_a_rank_error_is_its_own_and_of_the_current_job_only(tmp_path: Path) -> None:
    logs = GroupLogs(tmp_path, world_size=2)
    err0, err1 = _rank_file(tmp_path, 0, "stderr"), _rank_file(tmp_path, 1, "stderr")
    _append(_rank_file(tmp_path, 1, "stdout"), "step 1\n")
    _append(err1, "ValueError: an earlier job's\n")
    logs.mark()
    _append(err1, "RuntimeError: rank 1 crashed\n")
    _append(err0, "RuntimeError: Connection reset by peer\n")  # written last, by another rank
    assert logs.last_error(1) == "RuntimeError: rank 1 crashed"
    assert logs.last_error(0) == "RuntimeError: Connection reset by peer"
    logs.mark()
    assert logs.last_error(1) is None and logs.first_error() is None
    _append(tmp_path / "group.log", "torch.distributed.DistNetworkError: no rendezvous\n")
    assert logs.first_error() == "torch.distributed.DistNetworkError: no rendezvous"


def test_the_end_of_the_logs_says_where_each_line_came_from(tmp_path: Path) -> None:
    logs = GroupLogs(tmp_path, world_size=2)
    _append(tmp_path / "group.log", "W torchrun: sending SIGTERM\n")
    _append(_rank_file(tmp_path, 0, "stderr"), "Traceback:\nRuntimeError: reset\n")
    _append(_rank_file(tmp_path, 1, "stdout"), "step 1\n")
    assert logs.end().splitlines() == [
        "[torchrun] W torchrun: sending SIGTERM",
        "[rank 0] Traceback:",
        "[rank 0] RuntimeError: reset",
        "[rank 1 stdout] step 1",
    ]


def test_a_zombie_is_down_and_a_live_process_is_not() -> None:
    assert not is_exiting(os.getpid()) and not is_down(psutil.Process())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    proc = psutil.Process(child.pid)
    try:
        deadline = time.monotonic() + 10.0
        while proc.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
            time.sleep(0.01)
        assert is_down(proc)  # exited, not yet reaped by its parent
        assert sys.platform != "linux" or is_exiting(child.pid)  # its flags are read right
    finally:
        child.wait()
    assert is_down(proc)
