"""What a rank runs, built once per rank by a factory named with a dotted path.

The worker loads `factory(context, args)` once at start-up and keeps the runner (and its pipeline)
resident. Two kinds:
- a `LoopRunner` serves its rank itself: the standard step runner, whose rank 0 runs the step
  loop and batches the jobs it is sent, as the in-process sampler does;
- a `JobRunner` runs one job at a time on every rank, collectively; `JobControl` is how it
  reports phases and steps and learns, at the same step on every rank, that the job was cancelled
  (the group's own tests drive faults through one).
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, cast, runtime_checkable

from inline_core.device.split import ParallelSpec
from inline_core.dotted import resolve_object
from inline_core.parallel.protocol import Array, Json, Message

DEFAULT_RUNNER = "inline_core.parallel.step_runner:load_step_runner"


@dataclass(frozen=True)
class WorkerContext:
    rank: int
    world_size: int
    local_rank: int
    device: str  # "cpu" or "cuda:<local rank>"
    split: ParallelSpec
    engine: str  # "auto" | "cache-dit" | "xfuser"

    @property
    def is_leader(self) -> bool:
        return self.rank == 0


@dataclass
class JobOutput:
    """What one rank returns: plain metadata plus raw arrays (only the leader's are sent)."""

    meta: dict[str, Json] = field(default_factory=dict[str, Json])
    arrays: dict[str, Array] = field(default_factory=dict[str, Array])


class JobControl(Protocol):
    def phase(self, phase: str) -> None:
        """Report a phase ("encode", "sample", "decode") to the server (rank 0 only sends)."""
        ...

    def step(self, step: int, count: int) -> None:
        """Report a finished step. Collective: every rank calls it at every step, and all raise
        `JobCancelled` together when the job was cancelled."""
        ...


class JobRunner(Protocol):
    def describe(self) -> dict[str, Json]:
        """Sent to the server in `Ready` (model, split, engine)."""
        ...

    def run(
        self, params: Mapping[str, Json], blobs: Mapping[str, bytes], control: JobControl
    ) -> JobOutput: ...


@runtime_checkable
class LoopRunner(Protocol):
    """A runner that serves its rank itself rather than one job at a time: rank 0 takes every
    message from the server (`inbox`), decides what the ranks do and shares it (`share`); the
    others act on what rank 0 shared (`receive`). Both report to the server with `send`. The
    standard step runner is one (`step_runner.py`): rank 0 runs the step loop."""

    def describe(self) -> dict[str, Json]: ...

    def serve_leader(
        self,
        inbox: queue.Queue[Message],
        send: Callable[[Message], None],
        share: Callable[[Any], Any],
        idle_tick_s: float,
    ) -> None: ...

    def serve_follower(
        self, receive: Callable[[], Any], send: Callable[[Message], None]
    ) -> None: ...


class JobCancelled(Exception):
    """Raised on every rank, at the same step, when the job's cancel flag was set."""


RunnerFactory = Callable[[WorkerContext, Mapping[str, Json]], JobRunner | LoopRunner]


def resolve(dotted: str) -> Callable[..., Any]:
    """`"package.module:attribute"` -> the callable it names (ImportError/AttributeError if
    missing, TypeError if it is not callable)."""
    target = resolve_object(dotted)
    if not callable(target):
        raise TypeError(f"{dotted} is not callable")
    return cast(Callable[..., Any], target)
