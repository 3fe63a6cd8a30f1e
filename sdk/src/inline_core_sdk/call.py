"""`Call`: what a node's `run` gets: its params, its inputs, a scratch folder, progress, cancel."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inline_core_sdk.media import ImageRef, MediaFile

Report = Callable[[dict[str, Any]], None]


class Cancelled(Exception):
    """Raised by `Call.check_cancelled` once the run is cancelled; the server ends the node."""


def _drop(_message: dict[str, Any]) -> None:
    return None


@dataclass
class Call:
    # Checked by the server against the node's declared params, defaults filled in.
    params: Mapping[str, Any]
    # port -> ImageRef | MediaFile | str | number, or a list of them for a fan-in port.
    inputs: Mapping[str, Any]
    # This call's own folder: write video and audio outputs here (`new_path`).
    scratch: Path
    report: Report = _drop
    cancel_event: threading.Event = field(default_factory=threading.Event)

    def image(self, port: str) -> Any:
        """The image on `port` as a Pillow image (the pack's own Pillow)."""
        ref = self.inputs[port]
        if not isinstance(ref, ImageRef):
            raise TypeError(f"input {port!r} is not an image")
        return ref.to_pil()

    def array(self, port: str) -> Any:
        """The image or mask on `port` as a numpy uint8 array."""
        ref = self.inputs[port]
        if not isinstance(ref, ImageRef):
            raise TypeError(f"input {port!r} is not an image or a mask")
        return ref.to_array()

    def file(self, port: str) -> MediaFile:
        ref = self.inputs[port]
        if not isinstance(ref, MediaFile):
            raise TypeError(f"input {port!r} is not a video or audio file")
        return ref

    def new_path(self, suffix: str) -> Path:
        """A fresh file name in this call's scratch folder (e.g. for a video output)."""
        return self.scratch / f"{uuid.uuid4().hex}{suffix}"

    def progress(self, fraction: float) -> None:
        """Report how far the node is, 0..1 (streamed to clients like any node's progress)."""
        self.report({"type": "progress", "fraction": max(0.0, min(1.0, float(fraction)))})

    def step(self, step: int, total: int) -> None:
        """Report that `step` of `total` steps has finished (1-based)."""
        fraction = step / total if total else 1.0
        self.report({"type": "progress", "fraction": fraction, "step": step, "total": total})

    @property
    def cancelled(self) -> bool:
        return self.cancel_event.is_set()

    def check_cancelled(self) -> None:
        """Raise `Cancelled` if the run was cancelled; call it between units of work."""
        if self.cancel_event.is_set():
            raise Cancelled("cancelled")

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`, waking at once on cancel; True if cancelled."""
        return self.cancel_event.wait(seconds)
