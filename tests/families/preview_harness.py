"""Step previews of any family's step pipeline: each step's x0 estimate rendered by the preview
renderer (the latent-to-RGB factors of the pipeline's format). The last step's estimate is the
final latents (an Euler step to sigma 0 lands on its x0): a test compares it with the pipeline's
final latents shaped as the preview takes them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from PIL import Image

from inline_core.diffusion.preview.renderer import PreviewRenderer
from inline_core.runtime.preview import LATENT2RGB


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
