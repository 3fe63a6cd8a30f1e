"""Step previews of the real tiny Wan models through the step loop: each variant's x0 estimate is
in its own latent format (Wan 2.1's 16 channels, the TI2V-5B's 48, the A14B pair's on either
expert) and the last one is the finished latents; both methods render it at the picture's size
(the kit's tiny TAEHV decoders for `taesd`); a preview never changes the frames; and previewed
jobs sharing forwards each get their own."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch
from wan_harness import first_frame_image, wan_rig

from inline_core.diffusion.preview.renderer import PreviewRenderer
from inline_core.families.standalone import FamilyRig
from inline_core.families.wan.kit import WanKit
from inline_core.runtime.preview import EncodedPreview
from inline_core.runtime.video import Video
from inline_core.sampling.job import SampleJob
from inline_core.sampling.loop import StepLoopSampler
from inline_core.sampling.previews import PreviewChannel, PreviewWorker
from tests.batching_helpers import run_together

TI2V = "wan2.2_ti2v_tiny_fp32.safetensors"
A14B = "wan2.2_t2v_high_noise_tiny_fp32.safetensors"
BASE: dict[str, Any] = {"prompt": "a lantern", "frames": 9, "height": 32, "guidance": 3.0}
# variant -> (model file (None: the catalog's first), its request, its latents' format)
VARIANTS: dict[str, tuple[str | None, dict[str, Any], str]] = {
    "wan2.1": (None, {"width": 48}, "wan21"),
    "ti2v-text": (TI2V, {"width": 64}, "wan22"),
    "ti2v-image": (TI2V, {"width": 64, "image": first_frame_image(64, 32)}, "wan22"),
    "a14b": (A14B, {"width": 48, "boundary_ratio": 0.875, "shift": 12.0}, "wan21"),
}
STEPS = 4


@pytest.fixture(scope="module")
def sampler() -> Iterator[StepLoopSampler]:
    s = StepLoopSampler()
    yield s
    s.close()


@pytest.fixture(scope="module")
def rig(wan_kit: WanKit, sampler: StepLoopSampler) -> FamilyRig:
    return wan_rig(wan_kit.root, sampler)


@pytest.fixture(scope="module")
def renderer(wan_kit: WanKit) -> PreviewRenderer:
    return PreviewRenderer(wan_kit.root / "vae_approx", 512)


@pytest.fixture
def worker() -> Iterator[PreviewWorker]:
    w = PreviewWorker()
    yield w
    w.close()


def spec(variant: str, seed: int = 3) -> dict[str, Any]:
    return {**BASE, **VARIANTS[variant][1], "steps": STEPS, "seed": seed, "format": "png"}


def request(rig: FamilyRig, variant: str, seed: int = 3) -> tuple[Any, Any]:
    model = VARIANTS[variant][0]
    pipeline = rig.pipeline(model) if model else rig.pipeline()
    return pipeline, pipeline.request(**spec(variant, seed))


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_each_variant_s_estimate_is_its_format_s_and_the_last_is_the_finished_latents(
    rig: FamilyRig, renderer: PreviewRenderer, variant: str
) -> None:
    pipeline, state = request(rig, variant)
    pipeline.prepare_encode(state)
    estimates: list[torch.Tensor] = []
    experts: set[int] = set()
    while not state.done:
        (prediction,) = pipeline.denoise_step([state])
        assert pipeline.preview_format(state) == VARIANTS[variant][2]
        estimate = pipeline.preview_latents(state, prediction)
        assert estimate.data_ptr() != state.latents.value.data_ptr()  # a new tensor
        estimates.append(estimate)
        experts.add(state.expert)
        pipeline.step_scheduler(state, prediction)
    final: torch.Tensor = state.latents.value
    if "image" in VARIANTS[variant][1]:  # the start image's latent frame is not previewed
        final = final[:, :, 1:]
    assert estimates[-1].shape == final.shape
    # UniPC's last step lands on zero noise: where its prediction pointed.
    assert torch.allclose(estimates[-1], final, atol=1e-5)
    assert not torch.allclose(estimates[0], final, atol=1e-3)
    if variant == "a14b":
        assert experts == {0, 1}  # previewed on either expert, in one format
    size = (state.width, state.height)  # the picture's own (under the preview size)
    for method in ("latent2rgb", "taesd"):
        image = renderer.render(method, estimates[-1], pipeline.preview_format(state))
        assert (image.method, image.width, image.height) == (method, *size)


class Previews:
    """What a job's channel rendered (the latents it got) and delivered."""

    def __init__(self, renderer: PreviewRenderer, method: str) -> None:
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


def frames(output: object) -> np.ndarray[Any, Any]:
    assert isinstance(output, Video)
    return output.frames


@pytest.mark.parametrize("variant", ["wan2.1", "ti2v-image", "a14b"])
def test_a_preview_never_changes_the_frames(
    rig: FamilyRig,
    sampler: StepLoopSampler,
    renderer: PreviewRenderer,
    worker: PreviewWorker,
    variant: str,
) -> None:
    pipeline, state = request(rig, variant)
    plain = frames(sampler.run(SampleJob(pipeline, state)))
    for method in ("latent2rgb", "taesd"):
        previews = Previews(renderer, method)
        job = SampleJob(pipeline, pipeline.request(**spec(variant)))
        job.preview = previews.channel(worker)
        assert np.array_equal(frames(sampler.run(job)), plain)
        assert job.preview.flush(30.0)
        assert previews.got and previews.got[-1][1:] == (STEPS, STEPS)
        size = (state.width, state.height)
        assert {(p.method, p.width, p.height) for p, *_ in previews.got} == {(method, *size)}


def test_batched_jobs_each_get_their_own_previews(
    wan_kit: WanKit, renderer: PreviewRenderer, worker: PreviewWorker
) -> None:
    """Two requests of one shape share forwards (the loop held until both are in); each job's
    previews are its own render's estimates, as it makes them alone."""
    sampler = StepLoopSampler()
    try:
        pipeline = wan_rig(wan_kit.root, sampler).pipeline()
        seeds = (5, 6)
        alone: dict[int, torch.Tensor] = {}
        for seed in seeds:
            previews = Previews(renderer, "latent2rgb")
            job = SampleJob(pipeline, pipeline.request(**spec("wan2.1", seed)))
            job.preview = previews.channel(worker)
            sampler.run(job)
            assert job.preview.flush(30.0)
            alone[seed] = previews.latents[-1]
        batches: list[int] = []
        jobs: list[SampleJob] = []
        together = {seed: Previews(renderer, "latent2rgb") for seed in seeds}
        for seed in seeds:
            job = SampleJob(pipeline, pipeline.request(**spec("wan2.1", seed)))
            job.preview = together[seed].channel(worker)
            jobs.append(job)
        run_together(sampler, pipeline, jobs, on_forward=lambda states: batches.append(len(states)))
        assert worker.wait_idle(30.0)
    finally:
        sampler.close()
    assert 2 in batches  # they shared forwards: previews did not split the batch
    for seed in seeds:
        mine = together[seed]
        assert mine.got and mine.got[-1][1] == STEPS
        assert torch.allclose(mine.latents[-1], alone[seed], atol=1e-4)
    assert not torch.allclose(together[5].latents[-1], together[6].latents[-1], atol=1e-2)
