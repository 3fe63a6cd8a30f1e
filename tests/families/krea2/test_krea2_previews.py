"""Krea 2's step previews: each step's x0 estimate, as one frame of Wan 2.1 latents (the
Qwen-Image VAE's), renders through the preview renderer at the render's aspect; the last one is
the final latents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from krea2_harness import rig

from inline_core.families.krea2.kit import TEXT_LAYERS, Krea2Kit
from inline_core.sampling.loop import StepLoopSampler
from tests.families.preview_harness import step_previews


def test_each_step_previews_at_the_render_aspect(
    krea2_kit: Krea2Kit, krea_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    pipeline: Any = rig(krea2_kit, krea_sampler).pipeline("krea2_tiny.safetensors")
    state = pipeline.request(
        prompt="a kite", width=96, height=48, steps=3, guidance=0.0, seed=3, text_layers=TEXT_LAYERS
    )
    previews, latents = step_previews(pipeline, state, tmp_path / "vae_approx", 64)
    assert pipeline.preview_format(state) == "wan21"
    assert [tuple(x.shape) for x in latents] == [(1, 16, 1, 6, 12)] * 3
    assert [p.size for p in previews] == [(64, 32)] * 3
    torch.testing.assert_close(
        latents[-1], pipeline.post_latents(state).value, rtol=1e-4, atol=1e-4
    )
