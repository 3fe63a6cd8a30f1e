"""The server tests' `LiveServer`, plus what the worker-group tests look for below it."""

from __future__ import annotations

from dataclasses import dataclass

import psutil

from inline_core.parallel.launch import is_running
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
