"""Step previews of the tiny SDXL model: each step's x0 estimate is in SDXL's latent format, the
last one is the finished latents, both preview methods render it at the picture's size (the
kit's tiny decoder for `taesd`), whichever kind of sampler steps."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from sdxl_harness import sdxl_rig

from inline_core.diffusion.preview.renderer import PreviewRenderer
from inline_core.families.sdxl.kit import SDXLKit
from inline_core.sampling.loop import StepLoopSampler

SPEC: dict[str, Any] = {
    "prompt": "a lantern",
    "width": 64,
    "height": 48,
    "steps": 4,
    "seed": 3,
    "guidance": 4.0,
}


@pytest.mark.parametrize(
    "sampler",
    # one of each kind: multistep, two calls a step, ancestral noise, SDE, CFG++
    ["euler", "dpmpp_2m", "heun", "euler_ancestral", "dpmpp_2m_sde", "euler_cfg_pp"],
)
def test_each_estimate_is_sdxls_format_and_the_last_is_the_finished_latents(
    sdxl_kit: SDXLKit, sdxl_sampler: StepLoopSampler, sampler: str
) -> None:
    pipeline = sdxl_rig(sdxl_kit.root, sdxl_sampler).pipeline(sdxl_kit.checkpoint_name)
    state = pipeline.request(**SPEC, sampler=sampler)
    pipeline.prepare_encode(state)
    estimates: list[torch.Tensor] = []
    while not state.done:
        (prediction,) = pipeline.denoise_step([state])
        assert pipeline.preview_format(state) == "sdxl"
        estimate = pipeline.preview_latents(state, prediction)
        assert estimate.data_ptr() != state.latents.value.data_ptr()  # a new tensor
        estimates.append(estimate)
        pipeline.step_scheduler(state, prediction)
    final: torch.Tensor = state.latents.value
    assert estimates[-1].shape == final.shape == (1, 4, 6, 8)
    # The last step lands on sigma 0: where its prediction pointed.
    assert torch.allclose(estimates[-1], final, atol=1e-5)
    assert not torch.allclose(estimates[0], final, atol=1e-3)
    renderer = PreviewRenderer(sdxl_kit.root / "vae_approx", 512)
    for method in ("latent2rgb", "taesd"):
        image = renderer.render(method, estimates[-1], "sdxl")
        assert (image.method, image.width, image.height) == (method, 64, 48)
