"""Run events (what the websocket streams) and the per-node progress reporter.

Events are plain frozen dataclasses; `server/serialize.py` turns them into contract JSON.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from inline_core.takes import Take

WAITING = "waiting"  # a node's phase while it waits for the device (`sampling/waits.py`)


@dataclass(frozen=True)
class RunStarted:
    run_id: str


@dataclass(frozen=True)
class RunPlanned:
    """How much of the run's work each node of its closure is (`node_work`), so the run's
    fraction weighs a sampling node by its steps and a text input next to nothing."""

    run_id: str
    work: Mapping[str, float]


@dataclass(frozen=True)
class NodeStarted:
    run_id: str
    node_id: str


@dataclass(frozen=True)
class Progress:
    run_id: str
    node_id: str
    phase: str  # loading | encode | sample | decode | save | run
    fraction: float  # of this node, 0..1
    step: int | None = None
    step_count: int | None = None
    eta_ms: int | None = None
    # Phase "waiting": what the node waits for (`eta_ms`: about how long); its progress stands.
    waiting_for: str | None = None


@dataclass(frozen=True)
class NodeDone:
    run_id: str
    node_id: str
    cached: bool
    takes: tuple[Take, ...] = ()


@dataclass(frozen=True)
class NodeFailed:
    run_id: str
    node_id: str
    message: str


@dataclass(frozen=True)
class ChunkDecoded:
    """A chunk of a video's frames has been decoded (frames `first` .. `first + count - 1` of
    `total`, played at `fps`): a streaming VAE decode's progress, while the take is still to
    come."""

    run_id: str
    node_id: str
    first: int
    count: int
    total: int
    fps: float


@dataclass(frozen=True)
class ChunkStarted:
    """A chunked render starts a chunk (`components.step.ChunkMediaSpec.to_info`: which frames it
    adds), with the interactions applied at the boundary before it (`Interaction.to_info`)."""

    run_id: str
    node_id: str
    media: dict[str, int]
    interactions: tuple[dict[str, Any], ...] = ()


RunEvent = (
    RunStarted
    | RunPlanned
    | NodeStarted
    | Progress
    | NodeDone
    | NodeFailed
    | ChunkDecoded
    | ChunkStarted
)

# Share of a node's progress each phase covers (a sampling node's: its load, prompt encode,
# steps, decode and save); an unknown phase covers the whole node.
PHASES: dict[str, tuple[float, float]] = {
    "loading": (0.0, 0.1),
    "encode": (0.1, 0.15),
    "sample": (0.15, 0.9),
    "decode": (0.9, 0.97),
    "save": (0.97, 1.0),
}
_SAMPLE_SHARE = PHASES["sample"][1] - PHASES["sample"][0]
# A node's work in sampling steps when it has no steps of its own: one that runs a model (a
# loader, a text encode, a VAE decode) or a pack's code about one step; anything else (a text,
# an image op, a setting) next to nothing, so it never counts as a share of a render.
MODEL_WORK = 1.0
CHEAP_WORK = 0.01


def node_work(steps: int | None, runs_model: bool) -> float:
    """How much of a run's work a node is, in sampling steps: a node that samples `steps` its
    steps, over the share of its own progress the steps cover (so its load, encode and decode
    count as well)."""
    if steps is not None and steps > 0:
        return steps / _SAMPLE_SHARE
    return MODEL_WORK if runs_model else CHEAP_WORK


class EventSink(Protocol):
    def __call__(self, event: RunEvent, /) -> None: ...


@dataclass
class NodeReporter:
    """Reports one node's progress. Phases are weighted slices of the node's fraction."""

    run_id: str
    node_id: str
    sink: EventSink
    weights: dict[str, tuple[float, float]] = field(default_factory=lambda: dict(PHASES))
    _step_started: float | None = None
    _first_step_at: float | None = None

    def phase(self, name: str, fraction_in_phase: float = 0.0) -> None:
        lo, hi = self.weights.get(name, (0.0, 1.0))
        frac = lo + (hi - lo) * max(0.0, min(1.0, fraction_in_phase))
        if name == "sample" and fraction_in_phase == 0.0:
            self._first_step_at = time.perf_counter()
        self.sink(Progress(self.run_id, self.node_id, name, frac))

    def waiting(self, what: str, eta_s: float) -> None:
        """Report that the node waits for `what`, about `eta_s` seconds (its progress stands)."""
        eta = int(eta_s * 1000)
        self.sink(Progress(self.run_id, self.node_id, WAITING, 0.0, eta_ms=eta, waiting_for=what))

    def chunk(self, first: int, count: int, total: int, fps: float) -> None:
        """Report a decoded chunk of frames (and the decode's progress through the frames)."""
        self.sink(ChunkDecoded(self.run_id, self.node_id, first, count, total, fps))
        self.phase("decode", (first + count) / total if total else 1.0)

    def chunk_started(
        self, media: dict[str, int], interactions: tuple[dict[str, Any], ...] = ()
    ) -> None:
        """Report the chunk a chunked render starts, and the interactions applied before it."""
        self.sink(ChunkStarted(self.run_id, self.node_id, media, interactions))

    def step(self, step: int, step_count: int, phase: str = "sample") -> None:
        """Report that `step` of `step_count` steps has finished (1-based)."""
        now = time.perf_counter()
        if self._first_step_at is None:
            self._first_step_at = now
        eta_ms: int | None = None
        if step > 0:
            per_step = (now - self._first_step_at) / step
            eta_ms = int(per_step * (step_count - step) * 1000)
        lo, hi = self.weights.get(phase, (0.0, 1.0))
        frac = lo + (hi - lo) * (step / step_count if step_count else 1.0)
        self.sink(Progress(self.run_id, self.node_id, phase, frac, step, step_count, eta_ms))
