"""The torchrun entry of every rank: `python -m inline_core.parallel.worker`.

Each rank connects to the server (its own authenticated socket: hello, heartbeats, its job
outcomes), joins the process group, loads the runner and keeps it resident until the server
sends another pipeline to load (`Load`: the runner is dropped and the new one loaded in the same
processes). Rank 0 also receives the jobs. A `LoopRunner` then serves the rank itself (rank 0
decides and shares, the others follow); a `JobRunner`'s jobs are shared one at a time and run by
all ranks together.
"""

from __future__ import annotations

import gc
import os
import queue
import sys
import threading
import time
import traceback
from datetime import timedelta
from typing import Any

import psutil
import torch

from inline_core.errors import Cancelled, InlineError
from inline_core.parallel import torchdist
from inline_core.parallel.collective import (
    STOP,
    TICK,
    CancelFlags,
    CollectiveControl,
    Command,
    share_command,
)
from inline_core.parallel.ipc import Channel, connect_from_env
from inline_core.parallel.launch import is_down
from inline_core.parallel.lifeline import Lifeline, orphaned_exit
from inline_core.parallel.protocol import (
    Cancel,
    Failure,
    Hello,
    Job,
    Json,
    Load,
    Message,
    Ready,
    Result,
    Shutdown,
    StartFailed,
)
from inline_core.parallel.runner import (
    JobCancelled,
    JobRunner,
    LoopRunner,
    WorkerContext,
    resolve,
)
from inline_core.parallel.settings import RankSettings, ServerIdentity

GROUP_TIMEOUT = timedelta(minutes=30)


def main() -> int:
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    settings = RankSettings.from_env()
    # Connect before anything slow, so the server sees every rank early and can time it.
    channel = connect_from_env()
    channel.send(Hello(rank=rank, world_size=world_size, pid=os.getpid()))
    lifeline = Lifeline(channel, rank, ServerIdentity.from_env(), settings.heartbeat_s)
    lifeline.start()

    device = "cpu"
    if settings.backend == "nccl":
        torch.cuda.set_device(local_rank)
        device = f"cuda:{local_rank}"
    torchdist.init(settings.backend, GROUP_TIMEOUT)
    # Control traffic stays on CPU (gloo) whatever the compute backend is.
    control = torchdist.new_gloo_group() if settings.backend != "gloo" else None
    context = WorkerContext(
        rank=rank,
        world_size=world_size,
        local_rank=local_rank,
        device=device,
        split=settings.split,
        engine=settings.engine,
    )
    inbox: queue.Queue[Message] = queue.Queue()  # rank 0's: the server's messages, in order
    loads: queue.Queue[Load] = queue.Queue()  # rank 0's: a `Load` that ended the serving
    flags = CancelFlags()
    if rank == 0:
        reader = threading.Thread(
            target=_read_all,
            args=(channel, inbox, loads, flags),
            name="inline-leader-inbox",
            daemon=True,
        )
        reader.start()
    args = settings.runner_args
    while True:
        runner, error = _load(context, settings.runner, args)
        started: list[tuple[int, str | None]] = torchdist.all_gather_object(
            (os.getpid(), error), world_size, control
        )
        if any(failed for _, failed in started):
            if error is not None:
                channel.send(StartFailed(rank=rank, message=error))
            _leave(lifeline, channel)
            return 1
        assert runner is not None
        peers = Peers(rank, [pid for pid, _ in started])
        if rank == 0:
            info: dict[str, Json] = {"worldSize": world_size, "backend": settings.backend}
            info.update(runner.describe())
            channel.send(Ready(info=info))
        if isinstance(runner, LoopRunner):
            _serve_loop(runner, rank, channel, control, inbox, settings.idle_tick_s)
        elif rank == 0:
            _serve_leader(
                runner, context, channel, control, settings.idle_tick_s, peers, inbox, flags
            )
        else:
            _serve_follower(runner, context, channel, control, peers)
        # Serving ended: at `Shutdown`, or at a `Load` (rank 0 tells the others which).
        load = _next_load(rank, loads, control)
        if load is None:
            break
        args = load.runner_args
        del runner  # the old pipeline goes before the new one loads
        _release_memory(context)
    _leave(lifeline, channel)
    return 0


def _next_load(rank: int, loads: queue.Queue[Load], control: Any) -> Load | None:
    """The `Load` that ended the serving, shared from rank 0 (None: it was `Shutdown`)."""
    if rank == 0:
        try:
            load: Load | None = loads.get_nowait()
        except queue.Empty:
            load = None
        share_command(STOP if load is None else load, control)
        return load
    command = share_command(None, control)
    return command if isinstance(command, Load) else None


def _release_memory(context: WorkerContext) -> None:
    gc.collect()
    if context.device.startswith("cuda"):
        torch.cuda.empty_cache()


def _load(
    context: WorkerContext, dotted: str, args: dict[str, Json]
) -> tuple[JobRunner | LoopRunner | None, str | None]:
    try:
        factory = resolve(dotted)
        runner: JobRunner | LoopRunner = factory(context, args)
        return runner, None
    except Exception as exc:  # reported to the server as the reason the group cannot start
        traceback.print_exc()
        return None, f"rank {context.rank}: {type(exc).__name__}: {exc}"


class Peers:
    """The other ranks' processes, to tell which were already down when this rank failed: a
    peer's crash is what fails a collective here with a reset connection, after the fact."""

    def __init__(self, rank: int, pids: list[int]) -> None:
        self._procs: dict[int, psutil.Process] = {}
        for peer, pid in enumerate(pids):
            try:
                if peer != rank:
                    self._procs[peer] = psutil.Process(pid)
            except psutil.Error:
                continue

    def down(self) -> list[int]:
        return [peer for peer, proc in self._procs.items() if is_down(proc)]


def _leave(lifeline: Lifeline, channel: Channel) -> None:
    # A barrier first: a rank that tears its group down while a peer is still in a collective
    # can make that peer abort at exit.
    torchdist.barrier()
    torchdist.destroy()
    lifeline.stop()
    channel.close()


def _serve_loop(
    runner: LoopRunner,
    rank: int,
    channel: Channel,
    control: Any,
    inbox: queue.Queue[Message],
    idle_tick_s: float,
) -> None:
    def share(command: Command) -> Command:
        return share_command(command, control)

    if rank != 0:
        runner.serve_follower(lambda: share_command(None, control), channel.send)
        return
    runner.serve_leader(inbox, channel.send, share, idle_tick_s)


def _read_all(
    channel: Channel, inbox: queue.Queue[Message], loads: queue.Queue[Load], flags: CancelFlags
) -> None:
    """Every message from the server into `inbox`, in order, until `Shutdown`. A `Load` ends
    the serving as `Shutdown` does (the runner sees one) and waits in `loads` for the rank."""
    while True:
        try:
            message = channel.recv()
        except (EOFError, OSError):
            orphaned_exit("the server closed the connection")
            return
        if isinstance(message, Cancel):
            flags.add(message.job_id)
        if isinstance(message, Load):
            loads.put(message)
            inbox.put(Shutdown())
        elif message is not None:
            inbox.put(message)
        if isinstance(message, Shutdown):
            return


def _serve_leader(
    runner: JobRunner,
    context: WorkerContext,
    channel: Channel,
    control: Any,
    idle_tick_s: float,
    peers: Peers,
    inbox: queue.Queue[Message],
    flags: CancelFlags,
) -> None:
    while True:
        try:
            message = inbox.get(timeout=idle_tick_s)
        except queue.Empty:
            share_command(TICK, control)
            continue
        if isinstance(message, Shutdown):
            share_command(STOP, control)
            return
        if isinstance(message, Job):  # a `Cancel` is in `flags` already
            share_command(message, control)
            _execute(message, runner, context, channel, control, flags, peers)
            flags.discard(message.job_id)


def _serve_follower(
    runner: JobRunner, context: WorkerContext, channel: Channel, control: Any, peers: Peers
) -> None:
    while True:
        command: Command = share_command(None, control)
        if command == STOP:
            return
        if isinstance(command, Job):
            _execute(command, runner, context, channel, control, None, peers)


def _execute(
    job: Job,
    runner: JobRunner,
    context: WorkerContext,
    channel: Channel,
    control: Any,
    flags: CancelFlags | None,
    peers: Peers,
) -> None:
    ctl = CollectiveControl(
        job.job_id, rank=context.rank, group=control, channel=channel, flags=flags
    )
    began = time.perf_counter()
    try:
        output = runner.run(job.params, job.blobs, ctl)
        ctl.finish()
    except Exception as exc:
        at, down = time.monotonic(), peers.down()  # before the traceback: the moment it failed
        code, status, message = _describe(exc)
        channel.send(Failure(job.job_id, context.rank, code, status, message, at, down))
        return
    arrays = output.arrays if context.is_leader else {}
    # The rank's own time for the job, and the part of it spent on control traffic (progress,
    # cancel agreement), so the server can tell the group's overhead from the compute.
    meta: dict[str, Json] = {
        **output.meta,
        "computeS": time.perf_counter() - began,
        "controlS": ctl.seconds,
    }
    channel.send(Result(job.job_id, context.rank, meta=meta, arrays=arrays))


def _describe(exc: Exception) -> tuple[str, int, str]:
    """A job error's code, status and message; an unexpected one's traceback goes to stderr."""
    if isinstance(exc, JobCancelled):
        return Cancelled.code, Cancelled.status, "cancelled"
    if isinstance(exc, InlineError):
        return exc.code, exc.status, exc.message
    traceback.print_exc()
    return "run_failed", 500, f"{type(exc).__name__}: {exc}"


def _exit(code: int) -> None:
    """Leave without the interpreter's teardown: once the group is destroyed and the socket closed,
    unwinding torch, diffusers and their thread pools only costs time (about 3 s a rank measured
    here, which every shutdown and restart would wait for)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    _exit(main())
