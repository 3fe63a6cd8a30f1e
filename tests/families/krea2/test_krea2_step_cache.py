"""Step caching on the tiny Krea 2: a threshold that never reuses equals no caching; one that
reuses counts what it skipped, and a cached request batched with an uncached one renders as it
does alone (`step_cache_harness.py`); with the samplers of every kind too, as the cache sees the
sigma a call is made at, not the sampler's state (history, noise, CFG++'s unconditional output,
Heun's second call)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from krea2_harness import rig

from inline_core.families.krea2.kit import TEXT_LAYERS, Krea2Kit
from inline_core.sampling.loop import StepLoopSampler
from tests.families.step_cache_harness import check_step_cache


def pixels(image: Any) -> np.ndarray[Any, Any]:
    return np.asarray(image.convert("RGB"), dtype=np.int16)


SPEC: dict[str, Any] = {
    "prompt": "a kite",
    "width": 48,
    "height": 48,
    "steps": 6,
    "guidance": 2.0,
    "seed": 7,
    "text_layers": TEXT_LAYERS,
}


def test_step_cache_per_request(krea2_kit: Krea2Kit) -> None:
    sampler = StepLoopSampler()
    try:
        pipeline = rig(krea2_kit, sampler).pipeline("krea2_tiny.safetensors")
        check_step_cache(sampler, pipeline, SPEC, pixels, rows=2)  # the prompt and the negative
    finally:
        sampler.close()


@pytest.mark.parametrize(
    ("name", "calls"),
    [
        ("dpmpp_2m", 6),  # multistep: its history is of the outputs the cache hands back
        ("euler_ancestral", 6),  # draws noise each step
        ("dpmpp_2m_cfg_pp", 6),  # reads the unconditional row
        ("heun", 11),  # two calls a step, one on the last (to sigma 0)
    ],
)
def test_step_cache_with_other_samplers(krea2_kit: Krea2Kit, name: str, calls: int) -> None:
    sampler = StepLoopSampler()
    try:
        pipeline = rig(krea2_kit, sampler).pipeline("krea2_tiny.safetensors")
        spec = {**SPEC, "sampler": name}
        check_step_cache(sampler, pipeline, spec, pixels, rows=2, calls=calls)
    finally:
        sampler.close()
