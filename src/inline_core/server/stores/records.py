"""The values the run store hands out and takes in, beside `RunRecord` and `Take`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from inline_core.media import MediaKind
from inline_core.server.run_state import NodeState, RunRecord, RunStatus
from inline_core.takes import Take

# Notification channels: a store tells this process (and, on PostgreSQL, every server) about
# these after the write that caused them commits. Payloads carry ids, never the data itself.
EVENTS = "inline_events"  # payload: a run id whose event history grew
QUEUED = "inline_queued"  # payload: the submitting server's id, or "" (runs wait to be claimed)
CANCEL = "inline_cancel"  # payload: a running run's id whose client asked to cancel it


@dataclass(frozen=True)
class RunSummary:
    """The few columns a run listing needs (no graph decoding)."""

    id: str
    status: RunStatus
    target: str
    fraction: float
    created_at: float
    holder: str | None = None  # the server running it
    queue_position: int | None = None  # 1 for the next run to be claimed, while queued


@dataclass(frozen=True)
class Lease:
    """A server's hold on one running run: the server, and the fencing token of its claim.
    Every write for the run carries it; once another claim takes the run it matches nothing."""

    run_id: str
    owner: str
    epoch: int


@dataclass(frozen=True)
class ClaimRequest:
    server_id: str
    limit: int  # how many runs this server can start now
    capabilities: tuple[str, ...]  # what it has: a run is claimed only if it needs no more
    holding: tuple[str, ...]  # runs it holds already (never claimed twice by one server)
    lease_s: float
    max_retries: int
    # Shared stores: first put back runs whose holder stopped renewing their lease.
    take_over_expired: bool


@dataclass(frozen=True)
class Claimed:
    runs: list[RunRecord]  # claimed, oldest first, each with its lease (holder, epoch)
    queued: int  # runs still waiting to be claimed (by any server) after this claim
    requeued: list[str] = field(default_factory=list[str])  # expired leases put back
    exhausted: list[str] = field(default_factory=list[str])  # ... or ended: no retries left
    # How many times each claimed run had been started before (on any server); absent: never.
    ran_before: dict[str, int] = field(default_factory=dict[str, int])


class EventLike(Protocol):
    """What the store keeps of an event: its type and JSON body (`WireEvent` is one)."""

    @property
    def type(self) -> str: ...

    @property
    def body(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class StoredEvent:
    seq: int  # its place in the whole history (increasing; per run, in the order written)
    run_id: str
    attempt: int
    server_id: str
    type: str
    body: dict[str, Any]
    created_at: float  # the database's clock


@dataclass(frozen=True)
class RunMirror:
    """A running run as its holder sees it, written beside its events so any server can serve
    a snapshot consistent with the history that follows it."""

    nodes: dict[str, NodeState]
    fraction: float
    takes: list[Take]


@dataclass(frozen=True)
class JournalEntry:
    """A held run's events not yet in the history, and the state they lead to."""

    lease: Lease
    attempt: int
    events: Sequence[EventLike]
    mirror: RunMirror


@dataclass(frozen=True)
class RunView:
    """A run with its takes, and the last event folded into it: the snapshot's cursor."""

    record: RunRecord
    takes: list[Take]
    cursor: int


@dataclass(frozen=True)
class ServerSeen:
    """A server that renewed its presence within the lease timeout."""

    id: str
    started_at: float
    heartbeat_age_s: float
    leases: int


@dataclass(frozen=True)
class Renewal:
    """What a heartbeat learnt: the leases still held (run id -> epoch), the runs whose clients
    asked to cancel them, and the servers alive."""

    held: dict[str, int]
    cancel_requested: frozenset[str]
    servers: list[ServerSeen]


@dataclass(frozen=True)
class Asset:
    """An uploaded file in the assets folder (`server/assets.py`)."""

    id: str
    kind: MediaKind
    content_type: str
    size: int
    path: Path


@dataclass(frozen=True)
class AssetRow:
    """What the run store keeps of an asset (its bytes stay in the assets folder)."""

    id: str
    kind: str
    content_type: str
    size: int
    created_at: float
