"""Step previews of the real tiny Z-Image through the step loop: the x0 estimate is right, a
preview never changes the pixels, and previewed jobs batched together each get their own."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from zimage_sampling_kit import load_pipeline, pixels  # noqa: E402

from inline_core.diffusion.preview.renderer import PreviewRenderer  # noqa: E402
from inline_core.families.zimage.pipeline import ZImageStepPipeline  # noqa: E402
from inline_core.runtime.preview import EncodedPreview  # noqa: E402
from inline_core.sampling import SampleJob, StepLoopSampler  # noqa: E402
from inline_core.sampling.previews import PreviewWorker  # noqa: E402

SPEC: dict[str, Any] = {
    "prompt": "a red fox",
    "width": 64,
    "height": 64,
    "steps": 4,
    "seed": 5,
    "guidance": 0.0,
}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("zimage-previews") / "models"


@pytest.fixture(scope="module")
def pipeline(models: Path) -> Iterator[ZImageStepPipeline]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny forwards on a shared machine (see test_sampling_zimage.py)
    loader = StepLoopSampler(max_batch=1)
    yield load_pipeline(models, loader)
    loader.close()
    torch.set_num_threads(threads)


@pytest.fixture
def worker() -> Iterator[PreviewWorker]:
    w = PreviewWorker()
    yield w
    w.close()


class Previews:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.got: list[tuple[EncodedPreview, int, int]] = []

    def __call__(self, image: Any, step: int, step_count: int) -> None:
        with self.lock:
            self.got.append((image, step, step_count))


@pytest.mark.parametrize("sampler_name", ["euler", "dpmpp_2m"])
def test_the_last_step_s_x0_estimate_is_the_finished_latents(
    pipeline: ZImageStepPipeline, sampler_name: str
) -> None:
    state = pipeline.prepare_encode(pipeline.request(**SPEC, sampler=sampler_name))
    estimates: list[Any] = []
    while not state.done:
        (prediction,) = pipeline.denoise_step([state])
        estimates.append(pipeline.preview_latents(state, prediction))
        pipeline.step_scheduler(state, prediction)
    assert pipeline.preview_format(state) == "flux" and len(estimates) == 4
    final = state.latents.value if state.latents is not None else None
    assert final is not None and estimates[-1].shape == final.shape
    # The last step goes to sigma 0: what it lands on is what its prediction pointed at.
    assert torch.allclose(estimates[-1], final.float(), atol=1e-5)
    # Earlier estimates are not that (the noise is still in the latents they came from).
    assert not torch.allclose(estimates[0], final.float(), atol=1e-3)


def render(
    pipeline: ZImageStepPipeline, sampler: StepLoopSampler, preview: Any = None, **spec: Any
) -> Any:
    job = SampleJob(pipeline=pipeline, state=pipeline.request(**{**SPEC, **spec}))
    job.preview = preview
    return sampler.run(job)


def test_a_preview_never_changes_the_pixels(
    pipeline: ZImageStepPipeline, models: Path, worker: PreviewWorker
) -> None:
    renderer = PreviewRenderer(models / "vae_approx", 512)
    sampler = StepLoopSampler()
    try:
        plain = pixels(render(pipeline, sampler))
        for method in ("latent2rgb", "taesd"):
            previews = Previews()
            channel = worker.channel(
                lambda latents, fmt, m=method: renderer.render(m, latents, fmt), previews
            )
            image = render(pipeline, sampler, channel)
            assert worker.wait_idle(30.0)
            assert np.array_equal(pixels(image), plain)
            assert previews.got and previews.got[-1][1:] == (4, 4)
            assert {(p.method, p.width, p.height) for p, *_ in previews.got} == {(method, 64, 64)}
    finally:
        sampler.close()


def test_batched_jobs_each_get_their_own_previews(
    pipeline: ZImageStepPipeline, models: Path, worker: PreviewWorker
) -> None:
    renderer = PreviewRenderer(models / "vae_approx", 16)
    sampler = StepLoopSampler()
    release = threading.Event()
    forwards: list[int] = []
    denoise = pipeline.denoise_step

    class Gated:  # the real pipeline; its first forward waits until both jobs are in
        def __getattr__(self, name: str) -> Any:
            return getattr(pipeline, name)

        def denoise_step(self, states: Any) -> Any:
            forwards.append(len(states))
            release.wait(30.0)
            return denoise(states)

    gated: Any = Gated()
    try:
        outs = {seed: Previews() for seed in (1, 2)}
        futures: list[Future[Any]] = []
        for seed, width in ((1, 64), (2, 96)):
            job = SampleJob(
                pipeline=gated, state=pipeline.request(**{**SPEC, "seed": seed, "width": width})
            )
            job.preview = worker.channel(
                lambda latents, fmt: renderer.render("latent2rgb", latents, fmt), outs[seed]
            )
            futures.append(sampler.submit(job))
        while sampler.stats()["activeJobs"] + sampler.stats()["queuedJobs"] < 2 or not forwards:
            threading.Event().wait(0.005)
        release.set()
        for future in futures:
            future.result(60.0)
        assert worker.wait_idle(30.0)
    finally:
        sampler.close()
    assert 2 in forwards  # they shared forwards: previews did not split the batch
    assert {(p.width, p.height) for p, *_ in outs[1].got} == {(16, 16)}
    assert {(p.width, p.height) for p, *_ in outs[2].got} == {(16, 11)}
    assert outs[1].got[-1][1] == 4 and outs[2].got[-1][1] == 4
