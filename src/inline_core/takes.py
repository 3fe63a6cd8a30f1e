"""Takes (immutable outputs) and references to stored media."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from inline_core.media import MediaKind


@dataclass(frozen=True)
class MediaFacts:
    """What a take's file holds, read from its bytes: its content type and size, a video's
    frame count and rate, and the sound's rate, channels and length (a video's soundtrack, or an
    audio take's); None where the file does not say (e.g. an MP4 without PyAV)."""

    content_type: str
    width: int | None = None
    height: int | None = None
    frames: int | None = None  # a video's
    fps: float | None = None  # a video's
    sample_rate: int | None = None  # its sound's
    channels: int | None = None
    audio_s: float | None = None  # how long its sound plays

    @property
    def duration_s(self) -> float | None:
        if self.frames is None or not self.fps:
            return self.audio_s  # an audio take's
        return self.frames / self.fps

    def to_json(self) -> dict[str, Any]:
        """As the run store keeps it (snake_case, every field)."""
        return {
            "content_type": self.content_type,
            "width": self.width,
            "height": self.height,
            "frames": self.frames,
            "fps": self.fps,
            "sample_rate": self.sample_rate,
            "channels": self.channels,
            "audio_s": self.audio_s,
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any], content_type: str) -> MediaFacts:
        """Stored facts; `content_type` stands in where none were stored (an older take)."""
        return cls(
            content_type=str(raw.get("content_type") or content_type),
            width=raw.get("width"),
            height=raw.get("height"),
            frames=raw.get("frames"),
            fps=raw.get("fps"),
            sample_rate=raw.get("sample_rate"),
            channels=raw.get("channels"),
            audio_s=raw.get("audio_s"),
        )


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
    facts: MediaFacts


@dataclass(frozen=True)
class MediaRef:
    """A reference a graph makes to stored media: an uploaded asset or an earlier take."""

    ref: Literal["asset", "take"]
    id: str
    extra: dict[str, Any] = field(default_factory=dict[str, Any])

    def to_json(self) -> dict[str, Any]:
        return {"ref": self.ref, "id": self.id}
