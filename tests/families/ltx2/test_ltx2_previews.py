"""Step previews of the tiny LTX-2 through the step loop: each estimate is the video's x0 in the
`ltxv` latent format (the kit's latents have LTX-2's 128 channels), the last one is the finished
latents, a preview never changes the frames or the sound, and two previewed jobs sharing forwards
each get their own render's estimates (`preview_harness.py`). The kit's VAE is 2x down where the
format's factor is 32x, so a tiny preview is drawn at 32x its latents' size, capped at the
preview size."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from ltx2_harness import SMALL, first_frame_image, ltx2_rig

from inline_core.diffusion.preview.renderer import PreviewRenderer
from inline_core.families.ltx2.kit import LTX2Kit
from inline_core.families.ltx2.pipeline import unpack_video
from inline_core.families.standalone import FamilyRig
from inline_core.runtime.video import Video
from inline_core.sampling.loop import StepLoopSampler
from inline_core.sampling.previews import PreviewWorker
from tests.families.preview_harness import (
    check_own_previews_when_batched,
    check_preview_keeps_the_render,
    step_previews,
)

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


def frames_and_sound(output: object) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    assert isinstance(output, Video) and output.audio is not None
    return output.frames, output.audio.samples


@pytest.mark.parametrize("image", [False, True], ids=["text", "image"])
def test_the_estimate_is_the_video_s_x0_in_ltxv_and_the_last_is_the_finished_latents(
    rig: FamilyRig, renderer: PreviewRenderer, image: bool, tmp_path: Path
) -> None:
    pipeline: Any = rig.pipeline()
    state = pipeline.request(**spec(image=image))
    previews, estimates = step_previews(pipeline, state, tmp_path / "vae_approx", PREVIEW_SIZE)
    assert pipeline.preview_format(state) == "ltxv" and len(previews) == STEPS
    f, h, w = state.latent_shape
    final = unpack_video(state.latents, f, h, w)
    if image:  # the start image's latent frame is not previewed
        final = final[:, :, 1:]
    assert estimates[-1].shape == final.shape and final.shape[1] == 128
    # Euler's last step lands on zero noise: where its prediction pointed.
    assert torch.allclose(estimates[-1], final, atol=1e-5)
    assert not torch.allclose(estimates[0], final, atol=1e-3)
    assert {p.size for p in previews} == {renderer.fit((w * 32, h * 32))}
    for method in ("latent2rgb", "taesd"):  # no tiny decoder for ltxv: taesd is latent2rgb's
        preview = renderer.render(method, estimates[-1], "ltxv")
        assert preview.method == "latent2rgb"
        assert (preview.width, preview.height) == renderer.fit((w * 32, h * 32))


def test_a_preview_never_changes_the_frames_or_the_sound(
    rig: FamilyRig, sampler: StepLoopSampler, renderer: PreviewRenderer, worker: PreviewWorker
) -> None:
    check_preview_keeps_the_render(
        sampler, rig.pipeline(), spec(), renderer, worker, frames_and_sound
    )


def test_batched_jobs_each_get_their_own_previews(
    rig: FamilyRig, sampler: StepLoopSampler, renderer: PreviewRenderer, worker: PreviewWorker
) -> None:
    check_own_previews_when_batched(sampler, rig.pipeline(), [spec(5), spec(6)], renderer, worker)
