"""FLUX.2's step previews: each step's x0 estimate, unpatchified to the VAE's 32 channels at
twice the token grid (ComfyUI's `Flux2` preview), renders through the preview renderer at the
render's aspect; the last one is the final latents, so shaped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from flux2_harness import make_rig

from inline_core.families.flux2.kit import Flux2Kit
from inline_core.families.flux2.vae import unpatchify
from inline_core.sampling.loop import StepLoopSampler
from tests.families.preview_harness import step_previews


def test_each_step_previews_at_the_render_aspect(
    flux2_kit: Flux2Kit, sampler: StepLoopSampler, tmp_path: Path
) -> None:
    pipeline: Any = make_rig(flux2_kit.root, sampler).pipeline("flux2_klein_tiny.safetensors")
    state = pipeline.request(prompt="a kite", width=96, height=48, steps=3, guidance=1.0, seed=3)
    previews, latents = step_previews(pipeline, state, tmp_path / "vae_approx", 64)
    assert pipeline.preview_format(state) == "flux2"
    assert [tuple(x.shape) for x in latents] == [(1, 32, 6, 12)] * 3
    assert [p.size for p in previews] == [(64, 32)] * 3
    final = unpatchify(pipeline.post_latents(state).value)
    torch.testing.assert_close(latents[-1], final, rtol=1e-4, atol=1e-4)
