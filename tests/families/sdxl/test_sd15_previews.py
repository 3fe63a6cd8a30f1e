"""Step previews of the tiny SD 1.5 model: its estimates are in SD 1.x's latent format (not
SDXL's), the last one is the finished latents, and both preview methods render it (the kit's
tiny `taesd_decoder` for `taesd`)."""

from __future__ import annotations

import torch
from test_sd15_parity import sd15_rig

from inline_core.diffusion.preview.renderer import PreviewRenderer
from inline_core.families.sdxl.kit_sd15 import SD15Kit
from inline_core.sampling.loop import StepLoopSampler


def test_each_estimate_is_sd15s_format_and_the_last_is_the_finished_latents(
    sd15_kit: SD15Kit, sdxl_sampler: StepLoopSampler
) -> None:
    pipeline = sd15_rig(sd15_kit, sdxl_sampler).pipeline(sd15_kit.checkpoint.name)
    spec = {"prompt": "a lantern", "width": 64, "height": 48, "steps": 3, "seed": 3}
    state = pipeline.request(**spec, guidance=4.0, clip_skip=-1)
    pipeline.prepare_encode(state)
    estimates: list[torch.Tensor] = []
    while not state.done:
        (prediction,) = pipeline.denoise_step([state])
        assert pipeline.preview_format(state) == "sd15"
        estimates.append(pipeline.preview_latents(state, prediction))
        pipeline.step_scheduler(state, prediction)
    final: torch.Tensor = state.latents.value
    assert estimates[-1].shape == final.shape == (1, 4, 6, 8)
    assert torch.allclose(estimates[-1], final, atol=1e-5)
    renderer = PreviewRenderer(sd15_kit.root / "vae_approx", 512)
    for method in ("latent2rgb", "taesd"):
        image = renderer.render(method, estimates[-1], "sd15")
        assert (image.method, image.width, image.height) == (method, 64, 48)
