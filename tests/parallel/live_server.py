"""The server tests' `LiveServer`, plus what the worker-group tests look for below it."""

from __future__ import annotations

import signal
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil

from inline_core.parallel.launch import is_running
from tests.parallel.parallel_support import wait_gone
from tests.server.server_support import LiveServer as ServerProcess


@dataclass
class LiveServer(ServerProcess):
    def group_pids(self) -> list[int]:
        """The torchrun launcher and ranks running below the server."""
        assert self.proc is not None
        found: list[int] = []
        for child in psutil.Process(self.proc.pid).children(recursive=True):
            try:
                cmd = " ".join(child.cmdline())
            except psutil.Error:
                continue
            if is_running(child) and ("torch.distributed.run" in cmd or "parallel.worker" in cmd):
                found.append(child.pid)
        return found


@contextmanager
def started_split_server(
    data: Path, models: Path, parallel: str = "ulysses=2"
) -> Generator[LiveServer]:
    """A started server whose renders split across a CPU worker group; stopped afterwards, and
    its group must go down with it."""
    live = LiveServer(data, models, env={"INLINE_PARALLEL": parallel})
    live.start()
    workers: list[int] = []
    try:
        yield live
        workers = live.group_pids()
    finally:
        live.stop(signal.SIGTERM)
    assert wait_gone(workers) == []  # the group went down with the server
