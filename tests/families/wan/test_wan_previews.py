"""Step previews of the real tiny Wan models through the step loop: each variant's x0 estimate is
in its own latent format (Wan 2.1's 16 channels, the TI2V-5B's 48, the A14B pair's on either
expert) and the last one is the finished latents; both methods render it at the picture's size
(the kit's tiny TAEHV decoders for `taesd`); a preview never changes the frames; and previewed
jobs sharing forwards each get their own."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch
from wan_harness import first_frame_image, wan_rig

from inline_core.diffusion.preview.renderer import PreviewRenderer
from inline_core.families.standalone import FamilyRig
from inline_core.families.wan.kit import WanKit
from inline_core.runtime.video import Video
from inline_core.sampling.job import SampleJob
from inline_core.sampling.loop import StepLoopSampler
from inline_core.sampling.previews import PreviewWorker
from tests.families.preview_harness import check_own_previews_when_batched, previewed_run

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
        out, previews = previewed_run(sampler, pipeline, spec(variant), renderer, worker, method)
        assert np.array_equal(frames(out), plain)
        assert previews.got and previews.got[-1][1:] == (STEPS, STEPS)
        size = (state.width, state.height)
        assert {(p.method, p.width, p.height) for p, *_ in previews.got} == {(method, *size)}


def test_batched_jobs_each_get_their_own_previews(
    wan_kit: WanKit, renderer: PreviewRenderer, worker: PreviewWorker
) -> None:
    sampler = StepLoopSampler()
    try:
        pipeline = wan_rig(wan_kit.root, sampler).pipeline()
        specs = [spec("wan2.1", seed) for seed in (5, 6)]
        check_own_previews_when_batched(sampler, pipeline, specs, renderer, worker)
    finally:
        sampler.close()
