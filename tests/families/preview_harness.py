"""Step previews of any family's step pipeline: each step's x0 estimate rendered by the preview
renderer (the latent-to-RGB factors of the pipeline's format). The last step's estimate is the
final latents (an Euler step to sigma 0 lands on its x0): a test compares it with the pipeline's
final latents shaped as the preview takes them. A video family's tests also check here that a
preview never changes the render, and that previewed jobs sharing forwards each get their own."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from inline_core.diffusion.preview.renderer import PreviewRenderer
from inline_core.runtime.preview import LATENT2RGB, EncodedPreview
from inline_core.sampling.job import SampleJob
from inline_core.sampling.loop import StepLoopSampler
from inline_core.sampling.previews import PreviewChannel, PreviewWorker
from tests.batching_helpers import run_together


def step_previews(
    pipeline: Any, state: Any, vae_approx: Path, size: int
) -> tuple[list[Image.Image], list[torch.Tensor]]:
    """(each step's preview, each step's preview latents); `state` is left done, undecoded."""
    renderer = PreviewRenderer(vae_approx, size=size)
    previews: list[Image.Image] = []
    latents: list[torch.Tensor] = []
    state = pipeline.prepare_encode(state)
    while not state.done:
        (pred,) = pipeline.denoise_step([state])
        latents.append(pipeline.preview_latents(state, pred))
        picture, used = renderer.image(LATENT2RGB, latents[-1], pipeline.preview_format(state))
        assert used == LATENT2RGB
        previews.append(picture)
        pipeline.step_scheduler(state, pred)
    return previews, latents


class Previews:
    """What a job's preview channel rendered (the latents it got) and delivered."""

    def __init__(self, renderer: PreviewRenderer, method: str = LATENT2RGB) -> None:
        self.renderer = renderer
        self.method = method
        self.lock = threading.Lock()
        self.latents: list[torch.Tensor] = []
        self.got: list[tuple[EncodedPreview, int, int]] = []

    def render(self, latents: Any, latent_format: str) -> EncodedPreview:
        with self.lock:
            self.latents.append(latents)
        return self.renderer.render(self.method, latents, latent_format)

    def deliver(self, image: Any, step: int, step_count: int) -> None:
        with self.lock:
            self.got.append((image, step, step_count))

    def channel(self, worker: PreviewWorker) -> PreviewChannel:
        return worker.channel(self.render, self.deliver)


def previewed_run(
    sampler: StepLoopSampler,
    pipeline: Any,
    spec: dict[str, Any],
    renderer: PreviewRenderer,
    worker: PreviewWorker,
    method: str = LATENT2RGB,
) -> tuple[Any, Previews]:
    """`spec` rendered with its previews on (all of them delivered): (the output, its previews)."""
    previews = Previews(renderer, method)
    job = SampleJob(pipeline, pipeline.request(**spec))
    job.preview = previews.channel(worker)
    out = sampler.run(job)
    assert job.preview.flush(30.0)
    return out, previews


def check_preview_keeps_the_render(
    sampler: StepLoopSampler,
    pipeline: Any,
    spec: dict[str, Any],
    renderer: PreviewRenderer,
    worker: PreviewWorker,
    output: Callable[[Any], Sequence[np.ndarray[Any, Any]]],
    method: str = LATENT2RGB,
) -> Previews:
    """`spec` previewed renders exactly what it renders unpreviewed (each array `output` takes
    from the render: frames, sound) and delivers a preview of every step, the last one last."""
    plain = output(sampler.run(SampleJob(pipeline, pipeline.request(**spec))))
    out, previews = previewed_run(sampler, pipeline, spec, renderer, worker, method)
    for seen, expected in zip(output(out), plain, strict=True):
        assert np.array_equal(seen, expected)
    steps = int(spec["steps"])
    assert previews.got and previews.got[-1][1:] == (steps, steps)
    return previews


def check_own_previews_when_batched(
    sampler: StepLoopSampler,
    pipeline: Any,
    specs: Sequence[dict[str, Any]],
    renderer: PreviewRenderer,
    worker: PreviewWorker,
) -> None:
    """Requests of one shape (two or more, different seeds) share forwards (the loop held until
    every one is in); each job's last preview is its own render's estimate, as made alone."""
    alone = [previewed_run(sampler, pipeline, s, renderer, worker)[1].latents[-1] for s in specs]
    batches: list[int] = []
    together = [Previews(renderer) for _ in specs]
    jobs: list[SampleJob] = []
    for spec, previews in zip(specs, together, strict=True):
        job = SampleJob(pipeline, pipeline.request(**spec))
        job.preview = previews.channel(worker)
        jobs.append(job)
    run_together(sampler, pipeline, jobs, on_forward=lambda states: batches.append(len(states)))
    assert worker.wait_idle(30.0)
    assert len(specs) in batches  # they shared forwards: previews did not split the batch
    for spec, mine, solo in zip(specs, together, alone, strict=True):
        assert mine.got and mine.got[-1][1] == int(spec["steps"])
        assert torch.allclose(mine.latents[-1], solo, atol=1e-4)
    assert not torch.allclose(together[0].latents[-1], together[1].latents[-1], atol=1e-2)
