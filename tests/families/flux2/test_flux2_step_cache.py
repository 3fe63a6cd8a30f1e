"""Step caching on the tiny FLUX.2 klein base model, on its single-stream blocks: a threshold
that never reuses equals no caching; one that reuses counts what it skipped, and a cached request
batched with an uncached one renders as it does alone (`step_cache_harness.py`)."""

from __future__ import annotations

from typing import Any

from flux2_harness import make_rig, pixels

from inline_core.families.flux2.kit import Flux2Kit
from inline_core.families.flux2.kit_dev import Flux2DevKit
from inline_core.runtime.step_cache import StepCacheSettings
from inline_core.sampling.loop import StepLoopSampler
from tests.families.step_cache_harness import check_step_cache

# The tiny model's front residual moves by 1 to 1.8 (relative L1) from step to step: 4 is far
# above it, so it reuses as often as its cap allows.
LOOSE = StepCacheSettings(threshold=4.0, warmup=1, front_blocks=1, max_consecutive=2)


def test_step_cache_per_request(flux2_kit: Flux2Kit) -> None:
    sampler = StepLoopSampler()
    try:
        pipeline = make_rig(flux2_kit.root, sampler).pipeline("flux2_klein_base_tiny.safetensors")
        spec: dict[str, Any] = {
            "prompt": "a kite",
            "width": 64,
            "height": 48,
            "steps": 6,
            "guidance": 3.0,
            "guided": True,
            "seed": 7,
        }
        # Two rows a step: the prompt and the empty one.
        check_step_cache(sampler, pipeline, spec, pixels, rows=2, loose=LOOSE)
    finally:
        sampler.close()


def test_step_cache_per_request_on_dev(flux2_dev_kit: Flux2DevKit) -> None:
    """dev's one forward a step (its guidance embedded) caches as klein's does."""
    sampler = StepLoopSampler()
    try:
        pipeline = make_rig(flux2_dev_kit.root, sampler).pipeline("flux2_dev_tiny.safetensors")
        spec: dict[str, Any] = {
            "prompt": "a kite",
            "width": 64,
            "height": 48,
            "steps": 6,
            "guidance": 4.0,
            "embedded_guidance": True,
            "seed": 7,
        }
        check_step_cache(sampler, pipeline, spec, pixels, rows=1, loose=LOOSE)
    finally:
        sampler.close()
