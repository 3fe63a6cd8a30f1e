"""Step previews of the tiny LTX-2 through the step loop: each estimate is the video's x0 in the
`ltxv` latent format (the kit's latents have LTX-2's 128 channels), the last one is the finished
latents, a preview never changes the frames or the sound, and two previewed jobs sharing forwards
each get their own render's estimates. The kit's VAE is 2x down where the format's factor is
32x, so a tiny preview is drawn at 32x its latents' size, capped at the preview size."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import numpy as np
import pytest
import torch
from ltx2_harness import SMALL, first_frame_image, ltx2_rig

from inline_core.diffusion.preview.renderer import PreviewRenderer
from inline_core.families.ltx2.kit import LTX2Kit
from inline_core.families.ltx2.pipeline import unpack_video
from inline_core.families.standalone import FamilyRig
from inline_core.runtime.preview import EncodedPreview
from inline_core.runtime.video import Video
from inline_core.sampling.job import SampleJob
from inline_core.sampling.loop import StepLoopSampler
from inline_core.sampling.previews import PreviewChannel, PreviewWorker
from tests.batching_helpers import all_in_loop
from tests.server.server_support import wait_until

STEPS = 3
PREVIEW_SIZE = 256


@pytest.fixture(scope="module")
def sampler() -> Iterator[StepLoopSampler]:
    s = StepLoopSampler(token_budget=4096)  # the kit's 2x-down latents: many tokens a pixel
    yield s
    s.close()


@pytest.fixture(scope="module")
def rig(ltx2_kit: LTX2Kit, sampler: StepLoopSampler) -> FamilyRig:
    return ltx2_rig(ltx2_kit.root, sampler)


@pytest.fixture(scope="module")
def renderer(ltx2_kit: LTX2Kit) -> PreviewRenderer:
    return PreviewRenderer(ltx2_kit.root / "vae_approx", PREVIEW_SIZE)


@pytest.fixture
def worker() -> Iterator[PreviewWorker]:
    w = PreviewWorker()
    yield w
    w.close()


def spec(seed: int = 3, image: bool = False) -> dict[str, Any]:
    values: dict[str, Any] = {**SMALL, "steps": STEPS, "seed": seed, "guidance": 3.0}
    values.update(prompt="a lantern on a boat", format="png")
    if image:
        values["image"] = first_frame_image(32, 32, seed)
    return values


@pytest.mark.parametrize("image", [False, True], ids=["text", "image"])
def test_the_estimate_is_the_video_s_x0_in_ltxv_and_the_last_is_the_finished_latents(
    rig: FamilyRig, renderer: PreviewRenderer, image: bool
) -> None:
    pipeline: Any = rig.pipeline()
    state = pipeline.request(**spec(image=image))
    pipeline.prepare_encode(state)
    estimates: list[torch.Tensor] = []
    while not state.done:
        (prediction,) = pipeline.denoise_step([state])
        assert pipeline.preview_format(state) == "ltxv"
        estimate = pipeline.preview_latents(state, prediction)
        assert estimate.data_ptr() != state.latents.data_ptr()  # a new tensor
        estimates.append(estimate)
        pipeline.step_scheduler(state, prediction)
    f, h, w = state.latent_shape
    final = unpack_video(state.latents, f, h, w)
    if image:  # the start image's latent frame is not previewed
        final = final[:, :, 1:]
    assert estimates[-1].shape == final.shape and final.shape[1] == 128
    # Euler's last step lands on zero noise: where its prediction pointed.
    assert torch.allclose(estimates[-1], final, atol=1e-5)
    assert not torch.allclose(estimates[0], final, atol=1e-3)
    for method in ("latent2rgb", "taesd"):  # no tiny decoder for ltxv: taesd is latent2rgb's
        preview = renderer.render(method, estimates[-1], "ltxv")
        assert preview.method == "latent2rgb"
        assert (preview.width, preview.height) == renderer.fit((w * 32, h * 32))


class Previews:
    """What a job's channel rendered (the latents it got) and delivered."""

    def __init__(self, renderer: PreviewRenderer) -> None:
        self.renderer = renderer
        self.lock = threading.Lock()
        self.latents: list[torch.Tensor] = []
        self.got: list[tuple[EncodedPreview, int, int]] = []

    def render(self, latents: Any, latent_format: str) -> EncodedPreview:
        with self.lock:
            self.latents.append(latents)
        return self.renderer.render("latent2rgb", latents, latent_format)

    def deliver(self, image: Any, step: int, step_count: int) -> None:
        with self.lock:
            self.got.append((image, step, step_count))

    def channel(self, worker: PreviewWorker) -> PreviewChannel:
        return worker.channel(self.render, self.deliver)


def video(output: object) -> Video:
    assert isinstance(output, Video) and output.audio is not None
    return output


def test_a_preview_never_changes_the_frames_or_the_sound(
    rig: FamilyRig, sampler: StepLoopSampler, renderer: PreviewRenderer, worker: PreviewWorker
) -> None:
    pipeline: Any = rig.pipeline()
    plain = video(sampler.run(SampleJob(pipeline, pipeline.request(**spec()))))
    previews = Previews(renderer)
    job = SampleJob(pipeline, pipeline.request(**spec()))
    job.preview = previews.channel(worker)
    seen = video(sampler.run(job))
    assert np.array_equal(seen.frames, plain.frames)
    assert seen.audio is not None and plain.audio is not None
    assert np.array_equal(seen.audio.samples, plain.audio.samples)
    assert job.preview.flush(30.0)
    assert previews.got and previews.got[-1][1:] == (STEPS, STEPS)


def test_batched_jobs_each_get_their_own_previews(
    rig: FamilyRig, sampler: StepLoopSampler, renderer: PreviewRenderer, worker: PreviewWorker
) -> None:
    """Two requests of one shape share forwards (the loop held until both are in); each job's
    last preview is its own render's estimate, as it makes it alone."""
    pipeline: Any = rig.pipeline()
    seeds = (5, 6)
    alone: dict[int, torch.Tensor] = {}
    for seed in seeds:
        previews = Previews(renderer)
        job = SampleJob(pipeline, pipeline.request(**spec(seed)))
        job.preview = previews.channel(worker)
        sampler.run(job)
        assert job.preview.flush(30.0)
        alone[seed] = previews.latents[-1]
    release = threading.Event()
    batches: list[int] = []
    forward = pipeline.denoise_step

    def held(states: Any, /) -> Any:
        batches.append(len(states))
        release.wait(60.0)
        return forward(states)

    pipeline.denoise_step = held
    together = {seed: Previews(renderer) for seed in seeds}
    futures: list[Future[Any]] = []
    try:
        for seed in seeds:
            job = SampleJob(pipeline, pipeline.request(**spec(seed)))
            job.preview = together[seed].channel(worker)
            futures.append(sampler.submit(job))
        wait_until(lambda: all_in_loop(sampler, 2), "both of them in the loop")
        release.set()
        for future in futures:
            future.result(timeout=120)
    finally:
        release.set()
        del pipeline.denoise_step
    assert worker.wait_idle(30.0)
    assert 2 in batches  # they shared forwards: previews did not split the batch
    for seed in seeds:
        mine = together[seed]
        assert mine.got and mine.got[-1][1] == STEPS
        assert torch.allclose(mine.latents[-1], alone[seed], atol=1e-4)
    assert not torch.allclose(together[5].latents[-1], together[6].latents[-1], atol=1e-2)
