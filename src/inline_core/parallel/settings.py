"""The environment contract between `WorkerGroup` and its ranks (torch-free).

The group writes these variables into torchrun's environment; each rank reads them back. The
socket path and auth key travel here rather than on argv, where any local user could read them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import cast

import psutil

from inline_core.device.split import ParallelSpec
from inline_core.parallel.ipc import AUTHKEY_ENV, SOCKET_ENV
from inline_core.parallel.protocol import Json
from inline_core.parallel.runner import DEFAULT_RUNNER

SERVER_PID_ENV = "INLINE_PARALLEL_SERVER_PID"
SERVER_STARTED_ENV = "INLINE_PARALLEL_SERVER_STARTED"
BACKEND_ENV = "INLINE_PARALLEL_BACKEND"
SPLIT_ENV = "INLINE_PARALLEL"
ENGINE_ENV = "INLINE_PARALLEL_ENGINE"
RUNNER_ENV = "INLINE_PARALLEL_RUNNER"
RUNNER_ARGS_ENV = "INLINE_PARALLEL_RUNNER_ARGS"
HEARTBEAT_ENV = "INLINE_PARALLEL_HEARTBEAT_S"
IDLE_TICK_ENV = "INLINE_PARALLEL_IDLE_TICK_S"

ENGINES = ("auto", "cache-dit", "xfuser")


@dataclass(frozen=True)
class RankSettings:
    """What every rank needs besides torchrun's own RANK/WORLD_SIZE/LOCAL_RANK."""

    split: ParallelSpec
    backend: str = "gloo"  # "gloo" (CPU ranks) | "nccl" (one GPU per rank)
    engine: str = "auto"
    runner: str = DEFAULT_RUNNER
    runner_args: dict[str, Json] = field(default_factory=dict[str, Json])
    heartbeat_s: float = 0.5
    # Idle ranks wait in a broadcast; rank 0 sends a no-op this often so no wait ever reaches the
    # process group's timeout (NCCL's watchdog would abort the rank).
    idle_tick_s: float = 60.0

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ValueError(f"unknown split engine {self.engine!r}; engines: {', '.join(ENGINES)}")
        if self.backend not in ("gloo", "nccl"):
            raise ValueError(f"unknown torch.distributed backend {self.backend!r}")

    def to_env(self) -> dict[str, str]:
        return {
            BACKEND_ENV: self.backend,
            SPLIT_ENV: str(self.split),
            ENGINE_ENV: self.engine,
            RUNNER_ENV: self.runner,
            RUNNER_ARGS_ENV: json.dumps(self.runner_args, allow_nan=False),
            HEARTBEAT_ENV: repr(self.heartbeat_s),
            IDLE_TICK_ENV: repr(self.idle_tick_s),
        }

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RankSettings:
        source = os.environ if env is None else env
        args = json.loads(source.get(RUNNER_ARGS_ENV) or "{}")
        if not isinstance(args, dict):
            raise ValueError(f"{RUNNER_ARGS_ENV} must hold a JSON object")
        return cls(
            split=ParallelSpec.parse(source.get(SPLIT_ENV) or "off"),
            backend=source.get(BACKEND_ENV) or "gloo",
            engine=source.get(ENGINE_ENV) or "auto",
            runner=source.get(RUNNER_ENV) or DEFAULT_RUNNER,
            runner_args=cast(dict[str, Json], args),
            heartbeat_s=float(source.get(HEARTBEAT_ENV) or 0.5),
            idle_tick_s=float(source.get(IDLE_TICK_ENV) or 60.0),
        )


@dataclass(frozen=True)
class ServerIdentity:
    """The server process the ranks watch: pid plus start time, so a reused pid is not mistaken
    for a live server.

    The start time is counted from boot (clock ticks in /proc/<pid>/stat), as psutil's own
    process identity is: psutil's `create_time()` adds the boot time /proc/stat gives at each
    call, which moves by whole seconds when the system clock is set, and a rank comparing those
    took its live server for another process and left the group."""

    pid: int
    started: float

    @classmethod
    def of(cls, pid: int) -> ServerIdentity:
        return cls(pid, started_since_boot(pid))

    def to_env(self) -> dict[str, str]:
        return {SERVER_PID_ENV: str(self.pid), SERVER_STARTED_ENV: repr(self.started)}

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ServerIdentity:
        source = os.environ if env is None else env
        return cls(int(source[SERVER_PID_ENV]), float(source[SERVER_STARTED_ENV]))

    def matches(self, pid: int) -> bool:
        """Whether the process `pid` is this server (not another that took a reused pid)."""
        return pid == self.pid and abs(started_since_boot(pid) - self.started) < 1e-3


_STARTTIME_AFTER_NAME = 19  # field 22 of proc_pid_stat(5), the 20th after the command name
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def started_since_boot(pid: int) -> float:
    """Process `pid`'s start in seconds since boot, fixed for its life whatever the clock does.

    Raises `psutil.NoSuchProcess` when it is gone. Without procfs (not Linux) psutil's
    wall-clock start time stands in."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            # The command name (field 2) may hold spaces and parentheses: count after its end.
            fields = stat.read().rpartition(b")")[2].split()
    except FileNotFoundError:
        if os.path.isdir("/proc/self"):
            raise psutil.NoSuchProcess(pid) from None
        return psutil.Process(pid).create_time()
    return int(fields[_STARTTIME_AFTER_NAME]) / _CLOCK_TICKS


__all__ = [
    "AUTHKEY_ENV",
    "SOCKET_ENV",
    "RankSettings",
    "ServerIdentity",
]
