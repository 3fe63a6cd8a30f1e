"""The control plane between ranks: job hand-out and per-step progress/cancel agreement.

Control traffic always goes over a gloo (CPU) group, also when the compute backend is NCCL, so a
step boundary never forces a GPU->CPU sync just to read the cancel flag.
"""

from __future__ import annotations

import pickle
import threading
import time
from dataclasses import dataclass
from typing import Any

from inline_core.parallel import torchdist
from inline_core.parallel.ipc import Channel
from inline_core.parallel.protocol import Job, Json, Load, Phase, Progress
from inline_core.parallel.runner import JobCancelled

TICK = "tick"  # an idle no-op, keeps waiting ranks inside the group timeout
STOP = "stop"


@dataclass(frozen=True)
class Admit:
    """A step-loop runner's rank 0 admits a job: every rank builds and encodes its own copy."""

    job_id: int
    params: dict[str, Json]
    blobs: dict[str, bytes]


@dataclass(frozen=True)
class Forward:
    """A step-loop runner's next forward: these jobs, in this order, then each one's step. `live`
    is every job rank 0 still holds; the other ranks drop the copies of any other."""

    job_ids: tuple[int, ...]
    live: tuple[int, ...]


Command = Job | Admit | Forward | Load | str


class CancelFlags:
    """Job ids the server asked to cancel; written by rank 0's reader thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: set[int] = set()

    def add(self, job_id: int) -> None:
        with self._lock:
            self._ids.add(job_id)

    def discard(self, job_id: int) -> None:
        with self._lock:
            self._ids.discard(job_id)

    def __contains__(self, job_id: int) -> bool:
        with self._lock:
            return job_id in self._ids


# Every command starts as one fixed-size int64 broadcast: a tick, a stop or a forward (the step
# loop shares one before every forward) is that broadcast alone, anything else (a job, an
# admission: fields and blobs) says its pickled length there and follows as bytes.
HEADER = 64
_TICK, _STOP, _FORWARD, _PICKLED = 1, 2, 3, 4


def _header(command: Command) -> tuple[list[int], bytes | None]:
    if command == TICK:
        return [_TICK], None
    if command == STOP:
        return [_STOP], None
    if isinstance(command, Forward) and 3 + len(command.job_ids) + len(command.live) <= HEADER:
        return [
            _FORWARD,
            len(command.job_ids),
            len(command.live),
            *command.job_ids,
            *command.live,
        ], None
    data = pickle.dumps(command, protocol=pickle.HIGHEST_PROTOCOL)
    return [_PICKLED, len(data)], data


def share_command(command: Command | None, group: Any) -> Command:
    """Rank 0 passes its command; every other rank passes None and gets rank 0's."""
    header, data = _header(command) if command is not None else (None, None)
    padded = None if header is None else header + [0] * (HEADER - len(header))
    kind, *rest = torchdist.broadcast_ints(padded, HEADER, group)
    if kind == _TICK:
        return TICK
    if kind == _STOP:
        return STOP
    if kind == _FORWARD:
        jobs, live = rest[0], rest[1]
        return Forward(tuple(rest[2 : 2 + jobs]), tuple(rest[2 + jobs : 2 + jobs + live]))
    if kind != _PICKLED:
        raise RuntimeError(f"unexpected command kind {kind} from rank 0")
    shared = pickle.loads(torchdist.broadcast_bytes(data, rest[0], group))
    if not isinstance(shared, Job | Admit | Forward | Load | str):
        raise RuntimeError(f"unexpected command {type(shared).__name__} from rank 0")
    return shared


class CollectiveControl:
    """`JobControl` for one job on one rank. Rank 0 reports to the server; all ranks agree on
    cancellation through a one-element broadcast from rank 0 at every step.

    The agreement is pipelined: the flag sent after step k is read after step k+1, by which time
    the split forward has already brought every rank past it. So it never adds a sync point of its
    own, and a cancel lands one step later. Phase changes only report. `finish()` settles the last
    broadcast in flight; `seconds` is this rank's time spent on control traffic."""

    def __init__(
        self,
        job_id: int,
        *,
        rank: int,
        group: Any,
        channel: Channel | None,
        flags: CancelFlags | None,
    ) -> None:
        self._job_id = job_id
        self._leader = rank == 0
        self._group = group
        self._channel = channel
        self._flags = flags
        self._in_flight: torchdist.PendingFlag | None = None
        self.seconds = 0.0

    def phase(self, phase: str) -> None:
        if self._leader and self._channel is not None:
            began = time.perf_counter()
            self._channel.send(Phase(self._job_id, phase))
            self.seconds += time.perf_counter() - began

    def step(self, step: int, count: int) -> None:
        began = time.perf_counter()
        if self._leader and self._channel is not None:
            self._channel.send(Progress(self._job_id, step, count))
        previous, self._in_flight = self._in_flight, None
        cancelled = previous is not None and previous.result()
        if not cancelled:
            wanted = self._leader and self._flags is not None and self._job_id in self._flags
            self._in_flight = torchdist.start_flag(wanted, self._group)
        self.seconds += time.perf_counter() - began
        if cancelled:
            raise JobCancelled("cancelled")

    def finish(self) -> None:
        """Complete the broadcast still in flight (every rank calls it after its last step)."""
        pending, self._in_flight = self._in_flight, None
        if pending is not None:
            began = time.perf_counter()
            pending.result()
            self.seconds += time.perf_counter() - began
