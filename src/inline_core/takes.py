"""Takes (immutable outputs) and references to stored media."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from inline_core.media import MediaKind


@dataclass(frozen=True)
class Take:
    """One immutable output of a node. Its file never changes once written."""

    id: str
    run_id: str
    node_id: str
    kind: MediaKind
    uri: str
    hash: str  # "sha256-<hex>" of the file's bytes
    params: dict[str, Any]
    created_at: float
    path: str  # where the bytes live on this machine (never sent to clients)


@dataclass(frozen=True)
class MediaRef:
    """A reference a graph makes to stored media: an uploaded asset or an earlier take."""

    ref: Literal["asset", "take"]
    id: str
    extra: dict[str, Any] = field(default_factory=dict[str, Any])

    def to_json(self) -> dict[str, Any]:
        return {"ref": self.ref, "id": self.id}
