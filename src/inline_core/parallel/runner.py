"""What a rank runs: a `JobRunner`, built once per rank by a factory named with a dotted path.

The worker loads `factory(context, args)` once at start-up and keeps the runner (and its pipeline)
resident. Every rank runs every job collectively; `JobControl` is how a runner reports phases and
steps and learns, at the same step on every rank, that the job was cancelled.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from inline_core.device.split import ParallelSpec
from inline_core.dotted import resolve_object
from inline_core.parallel.protocol import Array, Json

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

    def run(self, params: Mapping[str, Json], blobs: Mapping[str, bytes], control: JobControl) -> (
        JobOutput
    ): ...


class JobCancelled(Exception):
    """Raised on every rank, at the same step, when the job's cancel flag was set."""


RunnerFactory = Callable[[WorkerContext, Mapping[str, Json]], JobRunner]


def resolve(dotted: str) -> Callable[..., Any]:
    """`"package.module:attribute"` -> the callable it names (ImportError/AttributeError if
    missing, TypeError if it is not callable)."""
    target = resolve_object(dotted)
    if not callable(target):
        raise TypeError(f"{dotted} is not callable")
    return cast(Callable[..., Any], target)
