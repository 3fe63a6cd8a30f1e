"""Interactions: changes a client sends to a render while it runs, applied at a chunk boundary
(spec 003's chunk-boundary protocol; torch-free).

A chunked render (a long video rendered chunk by chunk) holds an `InteractionInbox`. A client's
interaction is given the render's next boundary (the start of the chunk after the one rendering),
made durable by the caller while the inbox is locked, and only then queued: the loop takes a
boundary's interactions under the same lock, so an interaction is applied at exactly the boundary
it was given, never one later. A render restarted after a crash gets its stored interactions back
with their boundaries and applies each at the same one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from inline_core.errors import Busy, Conflict, InvalidRequest

# What an interaction may change, and how each is checked.
FIELDS = ("prompt", "negative_prompt", "guidance")
MAX_PROMPT_CHARS = 20_000
# A boundary takes at most this many: a client sending faster than the render reaches its
# boundaries is refused (429), so its writes, held under the inbox's lock, cannot hold the
# boundary back for long, nor fill the store.
MAX_PER_BOUNDARY = 16


@dataclass(frozen=True)
class Interaction:
    id: str
    chunk: int  # the boundary: applied before this chunk renders (1: before the second)
    prompt: str | None = None
    negative_prompt: str | None = None
    guidance: float | None = None

    def to_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"id": self.id, "chunk": self.chunk}
        for name in FIELDS:
            value = getattr(self, name)
            if value is not None:
                info[name] = value
        return info

    @classmethod
    def from_info(cls, info: Mapping[str, Any]) -> Interaction:
        return cls(
            id=str(info["id"]),
            chunk=int(info["chunk"]),
            prompt=info.get("prompt"),
            negative_prompt=info.get("negative_prompt"),
            guidance=None if info.get("guidance") is None else float(info["guidance"]),
        )


def checked_change(body: Mapping[str, Any]) -> dict[str, Any]:
    """A client's change, checked: at least one known field, each of its type."""
    unknown = sorted(set(body) - set(FIELDS))
    if unknown:
        raise InvalidRequest(
            f"an interaction changes {', '.join(FIELDS)}; unknown field(s): {', '.join(unknown)}"
        )
    change: dict[str, Any] = {}
    for name in ("prompt", "negative_prompt"):
        value = body.get(name)
        if value is None:
            continue
        if not isinstance(value, str):
            raise InvalidRequest(f"interaction field '{name}' must be a string")
        if len(value) > MAX_PROMPT_CHARS:
            raise InvalidRequest(f"interaction field '{name}' is over {MAX_PROMPT_CHARS} chars")
        change[name] = value
    guidance = body.get("guidance")
    if guidance is not None:
        if isinstance(guidance, bool) or not isinstance(guidance, int | float):
            raise InvalidRequest("interaction field 'guidance' must be a number")
        if not 1.0 <= float(guidance) <= 20.0:
            raise InvalidRequest(f"interaction field 'guidance' must be 1..20, got {guidance}")
        change["guidance"] = float(guidance)
    if not change:
        raise InvalidRequest(f"an interaction changes at least one of {', '.join(FIELDS)}")
    return change


class InteractionInbox:
    """One render's interactions: queued for a boundary, each taken there once."""

    def __init__(self, chunks: int, stored: Sequence[Interaction] = ()) -> None:
        self.chunks = chunks
        self._lock = threading.Lock()
        self._chunk = 0  # the chunk rendering now
        self._pending: list[Interaction] = sorted(stored, key=lambda i: i.chunk)
        self.applied: list[Interaction] = []  # the timeline, in the order applied

    @property
    def chunk(self) -> int:
        with self._lock:
            return self._chunk

    def queue(self, make: Callable[[int], Interaction]) -> Interaction:
        """`make(boundary)` builds the interaction for the next boundary and stores it (it may
        block on a durable write: the boundary cannot pass meanwhile); then it is queued."""
        with self._lock:
            boundary = self._chunk + 1
            if boundary >= self.chunks:
                raise Conflict(
                    f"the render is on its last chunk ({self._chunk + 1} of {self.chunks}): no "
                    "chunk boundary is left for an interaction"
                )
            if sum(1 for i in self._pending if i.chunk == boundary) >= MAX_PER_BOUNDARY:
                raise Busy(
                    f"{MAX_PER_BOUNDARY} interactions already wait for the boundary before "
                    f"chunk {boundary}, the most one boundary takes: send more once its "
                    "chunk_started event comes"
                )
            interaction = make(boundary)
            self._pending.append(interaction)
            return interaction

    def take(self, chunk: int) -> list[Interaction]:
        """The interactions of the boundary before `chunk`, now that the render reached it."""
        with self._lock:
            self._chunk = chunk
            due = [i for i in self._pending if i.chunk == chunk]
            late = [i for i in self._pending if i.chunk < chunk]
            self._pending = [i for i in self._pending if i.chunk > chunk]
            if late:  # a stored boundary the plan skipped: never silently moved
                raise RuntimeError(
                    f"interactions {[i.id for i in late]} were due before chunk {chunk}"
                )
            self.applied.extend(due)
            return due

    def applied_at(self, chunk: int) -> list[Interaction]:
        with self._lock:
            return [i for i in self.applied if i.chunk == chunk]

    def timeline(self) -> list[dict[str, Any]]:
        """What the take records: each change applied and its chunk (no ids: the same
        changes at the same boundaries make the same take)."""
        with self._lock:
            return [{k: v for k, v in i.to_info().items() if k != "id"} for i in self.applied]


class InteractionBoard:
    """The renders on this server that take interactions now, by run id (one node a run)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._inboxes: dict[str, InteractionInbox] = {}

    @contextmanager
    def open(self, run_id: str, inbox: InteractionInbox) -> Generator[None]:
        with self._lock:
            if run_id in self._inboxes:
                raise RuntimeError(f"run {run_id} already renders a node that takes interactions")
            self._inboxes[run_id] = inbox
        try:
            yield
        finally:
            with self._lock:
                self._inboxes.pop(run_id, None)

    def get(self, run_id: str) -> InteractionInbox | None:
        with self._lock:
            return self._inboxes.get(run_id)
