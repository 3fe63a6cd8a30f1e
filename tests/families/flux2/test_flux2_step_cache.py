"""Step caching on the tiny FLUX.2 klein base model and the tiny dev, on their single-stream
blocks: a threshold that never reuses equals no caching; one that reuses counts what it skipped,
and a cached request batched with an uncached one renders as it does alone
(`step_cache_harness.py`)."""

from __future__ import annotations

from typing import Any, cast

import pytest
from flux2_harness import make_rig, pixels

from inline_core.families.flux2.kit import Flux2Kit
from inline_core.families.flux2.kit_dev import Flux2DevKit
from inline_core.runtime.step_cache import StepCacheSettings
from inline_core.sampling.loop import StepLoopSampler
from tests.families.step_cache_harness import check_step_cache

# The tiny model's front residual moves by 1 to 1.8 (relative L1) from step to step: 4 is far
# above it, so it reuses as often as its cap allows.
LOOSE = StepCacheSettings(threshold=4.0, warmup=1, front_blocks=1, max_consecutive=2)


@pytest.mark.parametrize(
    ("kit", "model", "guidance", "rows"),
    [
        # klein base guided: two rows a step, the prompt and the empty one.
        ("flux2_kit", "flux2_klein_base_tiny.safetensors", {"guided": True, "guidance": 3.0}, 2),
        # dev: one forward a step, its guidance embedded.
        ("flux2_dev_kit", "flux2_dev_tiny.safetensors", {"embedded_guidance": True}, 1),
    ],
    ids=["klein-base", "dev"],
)
def test_step_cache_per_request(
    request: pytest.FixtureRequest, kit: str, model: str, guidance: dict[str, Any], rows: int
) -> None:
    root = cast(Flux2Kit | Flux2DevKit, request.getfixturevalue(kit)).root
    sampler = StepLoopSampler()
    try:
        pipeline = make_rig(root, sampler).pipeline(model)
        spec: dict[str, Any] = {
            "prompt": "a kite",
            "width": 64,
            "height": 48,
            "steps": 6,
            "guidance": 4.0,
            "seed": 7,
            **guidance,
        }
        check_step_cache(sampler, pipeline, spec, pixels, rows=rows, loose=LOOSE)
    finally:
        sampler.close()
