"""A rank's lifeline knows its server by pid and start time, whatever the wall clock does.

A rank exits as soon as it takes its server for gone (`lifeline.server_alive`). The start time
it compares is counted from boot: a wall-clock start time moves with the boot time /proc/stat
reports, which shifts by whole seconds when the system clock is set, and a rank comparing those
left a live server's group.
"""

from __future__ import annotations

import os
import subprocess
import sys

import psutil
import pytest

from inline_core.parallel.lifeline import server_alive
from inline_core.parallel.settings import ServerIdentity


def test_the_server_is_known_through_the_environment() -> None:
    me = ServerIdentity.of(os.getpid())
    assert ServerIdentity.from_env(me.to_env()) == me
    assert server_alive(ServerIdentity.from_env(me.to_env()))


def test_a_clock_set_meanwhile_does_not_make_a_live_server_look_gone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    me = ServerIdentity.of(os.getpid())
    booted, wall_clock_start = psutil.boot_time(), psutil.Process().create_time()
    # The system clock set one second on: /proc/stat's boot time moves with it.
    monkeypatch.setattr("psutil._pslinux.boot_time", lambda: booted + 1.0)
    assert psutil.Process().create_time() == pytest.approx(wall_clock_start + 1.0)
    assert server_alive(me)


def test_another_process_under_the_pid_is_not_the_server() -> None:
    me = ServerIdentity.of(os.getpid())
    assert not server_alive(ServerIdentity(me.pid, me.started - 5.0))


def test_an_exited_server_is_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        identity = ServerIdentity.of(child.pid)
        assert server_alive(identity)
    finally:
        child.kill()
        child.wait()
    assert not server_alive(identity)
