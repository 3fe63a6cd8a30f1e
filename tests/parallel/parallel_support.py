"""Helpers of the worker-group tests: 2 CPU ranks over gloo, process-table checks."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

import psutil

from inline_core.device.split import ParallelSpec
from inline_core.parallel.config import GroupConfig
from inline_core.parallel.group import WorkerGroup
from inline_core.parallel.launch import is_running
from inline_core.parallel.remote import RemotePipeline
from inline_core.parallel.sampler import ParallelSampler
from inline_core.parallel.settings import RankSettings
from inline_core.sampling import SampleJob

HERE = Path(__file__).resolve().parent
SPLIT = ParallelSpec.parse("ulysses=2")  # what INLINE_PARALLEL=ulysses=2 asks for
COLLECTIVE = "collective_runner:load"


def group_config(runner: str = COLLECTIVE, **overrides: object) -> GroupConfig:
    """Two gloo ranks; this folder on their PYTHONPATH so they can import the test runners."""
    base = GroupConfig(
        RankSettings(split=SPLIT, runner=runner, heartbeat_s=0.2),
        heartbeat_timeout_s=3.0,
        start_timeout_s=120.0,
        env={"PYTHONPATH": str(HERE), "INLINE_PROFILE": "cpu"},
    )
    return replace(base, **overrides)  # pyright: ignore[reportArgumentType]


def split_group_config(split: ParallelSpec, runner: str = COLLECTIVE) -> GroupConfig:
    """`group_config` on `split`'s ranks; four share two cores, so a loaded machine may starve a
    rank's heartbeat longer. The modules on one shared Ring group make it with this, so whichever
    starts it, it is the same group."""
    config = group_config(runner)
    timeout = 10.0 if split.world_size > 2 else config.heartbeat_timeout_s
    return replace(config, heartbeat_timeout_s=timeout, ranks=replace(config.ranks, split=split))


def xfuser_config(runner: str) -> GroupConfig:
    """`group_config` with xDiT as the ranks' engine."""
    config = group_config(runner)
    return replace(config, ranks=replace(config.ranks, engine="xfuser"))


def group_pids(group: WorkerGroup) -> list[int]:
    pids = group.pids()
    ranks: dict[int, int] = pids["ranks"]
    launcher: int | None = pids["launcher"]
    return [*ranks.values(), *([launcher] if launcher is not None else [])]


def alive(pids: Iterable[int]) -> list[int]:
    """The pids still running (a zombie waiting for its reaper counts as gone)."""
    found: list[int] = []
    for pid in pids:
        try:
            if is_running(psutil.Process(pid)):
                found.append(pid)
        except psutil.Error:
            continue
    return found


def group_children() -> list[psutil.Process]:
    """Processes of a worker group still below this test process."""
    out: list[psutil.Process] = []
    for child in psutil.Process().children(recursive=True):
        try:
            cmd = " ".join(child.cmdline())
        except psutil.Error:
            continue
        if is_running(child) and ("torch.distributed.run" in cmd or "parallel.worker" in cmd):
            out.append(child)
    return out


def wait_gone(pids: Iterable[int], timeout: float = 20.0, poll_s: float = 0.05) -> list[int]:
    """Wait (bounded) for `pids` to exit; returns those still running at the deadline."""
    pending = list(pids)
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        pending = alive(pending)
        if pending:
            time.sleep(poll_s)
    return alive(pending)


def at_once(sampler: ParallelSampler, jobs: list[SampleJob]) -> list[object]:
    """Run the jobs from one thread each, started together; each one's output or its error.
    Rank 0 holds its loop until all of them wait in it (`gather`), so they share forwards
    however this machine schedules the threads sending them."""
    out: list[object] = [None] * len(jobs)
    pipeline = jobs[0].pipeline
    assert isinstance(pipeline, RemotePipeline), pipeline
    sampler.gather(pipeline.remote_spec(), len(jobs))

    def run(index: int) -> None:
        try:
            out[index] = sampler.run(jobs[index])
        except Exception as exc:
            out[index] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    return out
