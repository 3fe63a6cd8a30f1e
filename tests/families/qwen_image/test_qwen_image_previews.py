"""Qwen-Image's step previews: each step's x0 estimate, as one frame of Wan 2.1 latents, renders
through the preview renderer (the latent-to-RGB factors of its VAE) at the render's aspect, and
the last step's preview follows the decoded picture."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from qwen_harness import TEXT_MODEL, qwen_rig

from inline_core.diffusion.preview.renderer import PreviewRenderer
from inline_core.families.qwen_image.kit import KitPaths
from inline_core.runtime.preview import LATENT2RGB
from inline_core.sampling.loop import StepLoopSampler


def test_each_step_previews_at_the_render_aspect(
    qwen_kit: KitPaths, qwen_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    pipeline: Any = qwen_rig(qwen_kit.root, qwen_sampler).pipeline(TEXT_MODEL)
    state = pipeline.prepare_encode(
        pipeline.request(prompt="a kite", width=96, height=48, steps=3, guidance=1.0, seed=3)
    )
    renderer = PreviewRenderer(tmp_path / "vae_approx", size=64)
    previews: list[Image.Image] = []
    while not state.done:
        (pred,) = pipeline.denoise_step([state])
        latents = pipeline.preview_latents(state, pred)
        assert tuple(latents.shape) == (1, 16, 1, 6, 12)
        picture, used = renderer.image(LATENT2RGB, latents, pipeline.preview_format(state))
        assert used == LATENT2RGB
        previews.append(picture)
        pipeline.step_scheduler(state, pred)
    assert [p.size for p in previews] == [(64, 32)] * 3
    final = np.asarray(pipeline.post_decode(state).resize((64, 32)), dtype=np.float64)
    # The last x0 estimate is the final latents: its preview follows the decoded picture more
    # closely than the first, noisy one does.
    first, last = (np.asarray(p, dtype=np.float64) for p in (previews[0], previews[-1]))
    assert (
        np.corrcoef(last.ravel(), final.ravel())[0, 1]
        >= np.corrcoef(first.ravel(), final.ravel())[0, 1]
    )
