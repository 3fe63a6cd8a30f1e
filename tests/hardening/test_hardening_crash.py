"""kill -9 at random moments under concurrent submissions: after every restart each accepted run
finishes, exactly once, with its take intact (bench/crash_restarts.py does 20 kills)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from crash_harness import CrashHarness

from tests.server.server_support import LiveServer, running_server

KILLS = 5


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    with running_server(tmp_path) as live:
        yield live


def test_random_kill_9s_lose_nothing_and_double_nothing(server: LiveServer) -> None:
    harness = CrashHarness(server, random.Random(7), clients=4)
    for index in range(KILLS):
        harness.kill_at_a_random_moment(index)
        totals = harness.verify()  # after each restart, not just at the end
        assert totals.temp_files == 0
    assert sum(c.accepted for c in harness.cycles) > 0
    # The kills landed on live work: some runs were unfinished when one landed.
    assert sum(c.unfinished_at_kill for c in harness.cycles) > 0
