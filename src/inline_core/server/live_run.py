"""`LiveRun`: the in-memory state of a run this server has claimed and not yet finished.

The manager owns one per run it holds, and serialises access to it with its own lock. Applying a
runtime event updates the node's state and yields the wire event for the run's history (written
by the `EventJournal`, read back by every server's `EventFeed`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace

from inline_core.graph.validate import ValidatedGraph
from inline_core.runtime.cancel import CancelToken
from inline_core.runtime.progress import (
    ChunkDecoded,
    ChunkStarted,
    NodeDone,
    NodeFailed,
    NodeStarted,
    Progress,
    RunEvent,
    RunPlanned,
)
from inline_core.server import serialize
from inline_core.server.events import CoalescedEvents, WireEvent
from inline_core.server.leases import HeldLease
from inline_core.server.run_state import NodeState, NodeStatus, RunRecord, RunStatus
from inline_core.server.stores.records import Lease, RunMirror
from inline_core.takes import Take


@dataclass(eq=False)
class LiveRun:
    record: RunRecord  # as claimed; the fields below are its live overlay
    validated: ValidatedGraph | None  # None unless submitted here: validated again before it runs
    held: HeldLease
    status: RunStatus
    nodes: dict[str, NodeState]
    attempts: int
    started_at: float | None = None
    token: CancelToken = field(default_factory=CancelToken)
    takes: dict[str, Take] = field(default_factory=dict[str, Take])
    finished: threading.Event = field(default_factory=threading.Event)
    # Events not yet in the store's history; whether the terminal write took the last of them.
    journal: CoalescedEvents = field(default_factory=CoalescedEvents)
    journal_closed: bool = False
    recording: bool = False  # its worker is done; its end is being written
    # Each node's share of the run's work (`RunPlanned`; 1 each until the run says), and the
    # sum of each node's fraction times its share.
    work: dict[str, float] = field(default_factory=dict[str, float])
    _work_total: float = 0.0
    _fraction_sum: float = 0.0

    @classmethod
    def claimed(
        cls, record: RunRecord, validated: ValidatedGraph | None, held: HeldLease
    ) -> LiveRun:
        return cls(
            record=record,
            validated=validated,
            held=held,
            status=record.status,
            nodes={k: NodeState() for k in record.nodes},
            attempts=record.attempts,
            started_at=record.started_at,
        )

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def lease(self) -> Lease:
        return self.held.lease

    @property
    def fraction(self) -> float:
        total = self._work_total if self.work else float(len(self.nodes))
        return self._fraction_sum / total if total > 0 else 0.0

    def _weigh(self, work: dict[str, float]) -> None:
        self.work = {node_id: max(0.0, float(work.get(node_id, 1.0))) for node_id in self.nodes}
        self._work_total = sum(self.work.values())
        self._fraction_sum = sum(self.work[k] * n.fraction for k, n in self.nodes.items())

    def snapshot(self) -> RunRecord:
        return replace(
            self.record,
            status=self.status,
            nodes=dict(self.nodes),
            attempts=self.attempts,
            started_at=self.started_at,
            fraction=self.fraction,
        )

    def take_list(self) -> list[Take]:
        return sorted(self.takes.values(), key=lambda t: (t.created_at, t.id))

    def mirror(self) -> RunMirror:
        return RunMirror(dict(self.nodes), self.fraction, self.take_list())

    def reset_nodes(self) -> dict[str, NodeState]:
        self.nodes = {k: NodeState() for k in self.nodes}
        self._fraction_sum = 0.0
        return dict(self.nodes)

    def _set(self, node_id: str, state: NodeState) -> None:
        old = self.nodes.get(node_id)
        change = state.fraction - (old.fraction if old is not None else 0.0)
        self._fraction_sum += self.work.get(node_id, 1.0) * change
        self.nodes[node_id] = state

    def apply(self, event: RunEvent) -> WireEvent | None:
        """Fold a runtime event into the node states; return what subscribers should hear."""
        if isinstance(event, RunPlanned):
            self._weigh(dict(event.work))
            return None
        if isinstance(event, NodeStarted):
            node = NodeState(NodeStatus.RUNNING, 0.0, phase="run")
        elif isinstance(event, Progress) and event.waiting_for is not None:
            # Waiting for the device: its progress stands, the reason and the wait are new.
            was = self.nodes.get(event.node_id, NodeState(NodeStatus.RUNNING))
            node = replace(
                was, phase=event.phase, eta_ms=event.eta_ms, waiting_for=event.waiting_for
            )
        elif isinstance(event, Progress):
            node = NodeState(
                NodeStatus.RUNNING,
                max(0.0, min(1.0, event.fraction)),
                phase=event.phase,
                step=event.step,
                step_count=event.step_count,
                eta_ms=event.eta_ms,
            )
        elif isinstance(event, NodeDone):
            status = NodeStatus.CACHED if event.cached else NodeStatus.DONE
            self._set(event.node_id, NodeState(status, 1.0))
            for take in event.takes:
                if take.run_id == self.id:
                    self.takes[take.id] = take
            return serialize.node_done_event(
                self.id, event.node_id, event.cached, event.takes, self.fraction
            )
        elif isinstance(event, ChunkDecoded):
            if event.node_id not in self.nodes:
                return None
            return serialize.chunk_event(
                self.id, event.node_id, event.first, event.count, event.total, event.fps
            )
        elif isinstance(event, ChunkStarted):
            if event.node_id not in self.nodes:
                return None
            return serialize.chunk_started_event(
                self.id, event.node_id, event.media, event.interactions
            )
        elif isinstance(event, NodeFailed):
            old = self.nodes.get(event.node_id, NodeState())
            node = replace(old, state=NodeStatus.ERROR, eta_ms=None)
        else:  # RunStarted: the manager announces the run itself
            return None
        if event.node_id not in self.nodes:
            return None  # a node outside the closure; nothing to report
        self._set(event.node_id, node)
        return serialize.progress_event(self.id, event.node_id, node, self.fraction)

    def final_nodes(self) -> dict[str, NodeState]:
        """Node states to store with a terminal status: nothing is left `running`."""
        out: dict[str, NodeState] = {}
        for node_id, node in self.nodes.items():
            if node.state == NodeStatus.RUNNING:
                node = replace(node, state=NodeStatus.QUEUED, eta_ms=None)
            out[node_id] = node
        return out
