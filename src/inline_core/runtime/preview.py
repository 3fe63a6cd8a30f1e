"""Step previews as a run sees them (torch-free): the methods, the image, where a run's go.

A run's previews are delivered, never stored: the server that runs the run keeps each run's newest
one and pushes it to the run's sockets. A preview never touches the take's pixels: it is computed
from a copy of the x0 estimate, on a thread of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

NONE = "none"
LATENT2RGB = "latent2rgb"
TAESD = "taesd"
PREVIEW_METHODS: tuple[str, ...] = (NONE, LATENT2RGB, TAESD)
# The share of the time the preview worker may spend on a method's renders: its budget in a
# step's time (the cheap linear map 3%, a tiny decoder 10%, under its 15%), so that even a
# worker holding the interpreter lock the whole time it renders takes no more from the step
# loop; a method costlier than that sends fewer previews instead (bench/previews.py).
PREVIEW_DUTY: dict[str, float] = {LATENT2RGB: 0.03, TAESD: 0.10}


def preview_duty(method: str) -> float:
    return PREVIEW_DUTY.get(method, PREVIEW_DUTY[TAESD])


@dataclass(frozen=True)
class EncodedPreview:
    """An image as the preview renderer encoded it."""

    data: bytes
    format: str  # "jpeg" | "png"
    width: int
    height: int
    method: str  # the method that made it (taesd falls back to latent2rgb without a decoder)


@dataclass(frozen=True)
class PreviewImage:
    run_id: str
    node_id: str
    step: int  # steps done when it was taken (1-based)
    step_count: int
    image: EncodedPreview


@dataclass(frozen=True)
class PreviewTarget:
    """What a run asks of previews: its method, and where its images go (any thread; must not
    block)."""

    method: str
    deliver: Callable[[PreviewImage], None]

    @property
    def enabled(self) -> bool:
        return self.method != NONE
