"""The state of a run and of each of its nodes, as the run store keeps it and the manager
updates it.

Plain data: `stores/` persists it, `manager.py` changes it, `serialize.py` puts it on the wire.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class RunStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    ERROR = "error"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in (RunStatus.DONE, RunStatus.ERROR, RunStatus.CANCELLED)


class NodeStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    CACHED = "cached"
    DONE = "done"
    ERROR = "error"
    CANCELLED = "cancelled"  # shown for a node a cancelled run never finished


@dataclass(frozen=True)
class NodeState:
    state: NodeStatus = NodeStatus.QUEUED
    fraction: float = 0.0
    phase: str | None = None
    step: int | None = None
    step_count: int | None = None
    eta_ms: int | None = None
    waiting_for: str | None = None  # phase "waiting": what for (`etaMs`: about how long)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.state.value, "fraction": round(self.fraction, 4)}
        if self.phase is not None:
            out["phase"] = self.phase
        if self.step is not None:
            out["step"] = self.step
        if self.step_count is not None:
            out["stepCount"] = self.step_count
        if self.eta_ms is not None:
            out["etaMs"] = self.eta_ms
        if self.waiting_for is not None:
            out["waitingFor"] = self.waiting_for
        return out

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> NodeState:
        return cls(
            state=NodeStatus(raw.get("state", "queued")),
            fraction=float(raw.get("fraction", 0.0)),
            phase=raw.get("phase"),
            step=raw.get("step"),
            step_count=raw.get("stepCount"),
            eta_ms=raw.get("etaMs"),
            waiting_for=raw.get("waitingFor"),
        )


def run_fraction(nodes: Mapping[str, NodeState]) -> float:
    """A run's progress: the mean of its nodes' fractions (its closure, in execution order)."""
    if not nodes:
        return 0.0
    return sum(n.fraction for n in nodes.values()) / len(nodes)


@dataclass(frozen=True)
class RunRecord:
    """One run as stored. `graph` is the graph with params normalised and seeds resolved."""

    id: str
    target: str
    graph: dict[str, Any]
    status: RunStatus
    created_at: float
    request_hash: str  # canonical hash of the request as submitted (idempotency check)
    client_run_id: str | None = None
    attempts: int = 0
    started_at: float | None = None
    finished_at: float | None = None
    error: dict[str, Any] | None = None  # {"code", "message", "nodeId"?}
    nodes: dict[str, NodeState] = field(default_factory=dict[str, NodeState])
    fraction: float = 0.0
    # The server holding it while it runs (its lease), and the fencing token of that claim.
    holder: str | None = None
    lease_epoch: int = 0
    # Options that change how the run is delivered, never its pixels (e.g. {"preview": ...}).
    options: dict[str, Any] = field(default_factory=dict[str, Any])


@dataclass(frozen=True)
class NewRun:
    """What the manager asks the store to insert for an accepted submission."""

    id: str
    target: str
    graph: dict[str, Any]
    request_hash: str
    client_run_id: str | None
    node_ids: tuple[str, ...]  # the target's closure, in execution order
    created_at: float
    # What a server must have to run it (node types, named models, a device kind): see
    # `server/run_needs.py`. A server claims only the runs whose needs it meets.
    needs: tuple[str, ...] = ()
    # The run's options as checked at submit (`server/run_options.py`), e.g. {"preview": ...}.
    options: dict[str, Any] = field(default_factory=dict[str, Any])
