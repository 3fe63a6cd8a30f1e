"""Real tiny Z-Image pipelines for the sampler tests and the batching bench (imports torch).

`load_pipeline` builds the kit's random-weight models into a folder and loads them the way the
server does (catalog -> family -> resident stacks). `Watched` wraps a real pipeline to record each
forward's group and decode call and to park the loop in its first forward until a test releases
it, so a test can queue several jobs and know they met; it changes no arithmetic.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from PIL import Image

from inline_core.families.standalone import family_rig
from inline_core.families.zimage import ZImageFamily
from inline_core.families.zimage.kit import build_kit
from inline_core.families.zimage.pipeline import ZImageStepPipeline
from inline_core.families.zimage.request import ZImageRequest
from inline_core.sampling.job import BatchedSampler


def load_pipeline(
    models_dir: Path, sampler: BatchedSampler, size: str = "tiny", build: bool = True
) -> ZImageStepPipeline:
    if build:
        build_kit(models_dir, size=size, layouts=("comfy",))
    pipeline: ZImageStepPipeline = family_rig(ZImageFamily, models_dir, sampler).pipeline()
    return pipeline


def solo_render(pipeline: ZImageStepPipeline, state: ZImageRequest) -> Image.Image:
    """The reference: one request driven through the four calls on its own, no sampler."""
    state = pipeline.prepare_encode(state)
    while not state.done:
        (prediction,) = pipeline.denoise_step([state])
        pipeline.step_scheduler(state, prediction)
    return pipeline.post_decode(state)


def pixels(image: Image.Image) -> npt.NDArray[np.int16]:
    return np.asarray(image.convert("RGB"), dtype=np.int16)


class Watched:
    """A real pipeline, plus a record of each forward's group and a gate on the first forward."""

    def __init__(self, inner: ZImageStepPipeline) -> None:
        self.inner = inner
        self.serial_phases = inner.serial_phases
        self.release = threading.Event()
        self.batches: list[tuple[int, ...]] = []  # seeds sharing each forward
        self.decodes: list[tuple[int, ...]] = []  # seeds sharing each decode call
        self.before_forward: list[Callable[[Sequence[ZImageRequest]], object]] = []

    def prepare_encode(self, state: ZImageRequest, /) -> ZImageRequest:
        return self.inner.prepare_encode(state)

    def denoise_step(self, states: Sequence[ZImageRequest], /) -> list[Any]:
        self.batches.append(tuple(s.seed for s in states))
        self.release.wait(30.0)
        for hook in self.before_forward:
            hook(states)
        return list(self.inner.denoise_step(states))

    def step_scheduler(self, state: ZImageRequest, noise_pred: Any, /) -> None:
        self.inner.step_scheduler(state, noise_pred)

    def post_decode(self, state: ZImageRequest, /) -> Image.Image:
        self.decodes.append((state.seed,))
        return self.inner.post_decode(state)

    def decode_key(self, state: ZImageRequest, /) -> Hashable | None:
        return self.inner.decode_key(state)

    def decode_pixels(self, state: ZImageRequest, /) -> int:
        return self.inner.decode_pixels(state)

    def post_decode_many(self, states: Sequence[ZImageRequest], /) -> list[Image.Image]:
        self.decodes.append(tuple(s.seed for s in states))
        return self.inner.post_decode_many(states)
