"""The FLUX.2 node takes a shift of its own (`families/nodes/sampling.py`, run by the shared flow
pipeline): its own `mu` set by hand renders the model's own pixels, another one another picture,
and the take records it."""

from __future__ import annotations

from pathlib import Path

from flux2_harness import make_rig, max_diff, render, take_pixels

from inline_core.families.flux2.kit import Flux2Kit
from inline_core.families.flux2.pipeline import empirical_mu
from inline_core.sampling.loop import StepLoopSampler

STEPS = 3


def test_the_node_runs_a_shift_of_its_own(flux2_kit: Flux2Kit, tmp_path: Path) -> None:
    sampler = StepLoopSampler()
    try:
        rig = make_rig(flux2_kit.root, sampler)
        own = render(rig, tmp_path, steps=STEPS)
        # 64x64 pixels: 4x4 tokens, FLUX.2's fit of mu over the tokens and the steps.
        by_hand = render(rig, tmp_path, steps=STEPS, mu=empirical_mu(16, STEPS))
        other = render(rig, tmp_path, steps=STEPS, shift=6.0)
    finally:
        sampler.close()
    assert max_diff(take_pixels(by_hand), take_pixels(own)) == 0
    assert max_diff(take_pixels(other), take_pixels(own)) > 0
    (take,) = other.takes
    assert take.params["shift"] == 6.0 and "mu" not in take.params
