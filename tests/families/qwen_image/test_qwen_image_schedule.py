"""The `alibaba/qwen-image` node's `schedule` (the name every family node uses) reaches its
sampling, and one step on the model's own schedule, which stretches its sigmas to a terminal level
(diffusers divides by zero there: every sigma NaN), is refused naming the way out."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from qwen_harness import TEXT_MODEL, qwen_rig, render, take_pixels

from inline_core.diffusion.flow.samplers import model_sigmas
from inline_core.errors import InvalidRequest
from inline_core.families.qwen_image.files import SCHEDULER_CONFIG
from inline_core.families.qwen_image.kit import KitPaths
from inline_core.sampling.loop import StepLoopSampler


def test_the_schedule_param_picks_the_sigmas(
    qwen_kit: KitPaths, qwen_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    rig = qwen_rig(qwen_kit.root, qwen_sampler)
    simple = render(rig, tmp_path, model=TEXT_MODEL, steps=4, guidance=1.0)
    karras = render(rig, tmp_path, model=TEXT_MODEL, steps=4, guidance=1.0, schedule="karras")
    assert simple.takes[0].params["sigma_schedule"] == "simple"
    assert karras.takes[0].params["sigma_schedule"] == "karras"
    assert int(np.abs(take_pixels(simple) - take_pixels(karras)).max()) > 0


def test_one_step_on_the_models_own_schedule_is_refused(
    qwen_kit: KitPaths, qwen_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    rig = qwen_rig(qwen_kit.root, qwen_sampler)
    with pytest.raises(InvalidRequest, match="takes at least 2 steps") as refused:
        render(rig, tmp_path, model=TEXT_MODEL, steps=1, guidance=1.0)
    assert refused.value.status == 422
    # A fixed shift drops the stretch (ComfyUI's ModelSamplingAuraFlow): one step renders.
    one = take_pixels(render(rig, tmp_path, model=TEXT_MODEL, steps=1, guidance=1.0, shift=3.0))
    assert one.std() > 0


def test_the_stretch_ends_at_the_terminal_level_from_two_steps() -> None:
    config = {k: v for k, v in SCHEDULER_CONFIG.items() if not k.startswith("_")}
    with pytest.raises(InvalidRequest, match="terminal level \\(0.02\\)"):
        model_sigmas(config, 1, 0.8)
    sigmas = model_sigmas(config, 2, 0.8)
    assert all(np.isfinite(sigmas)) and sigmas[-1] == 0.0
    assert sigmas[-2] == pytest.approx(0.02, abs=1e-6)  # stretched to shift_terminal
    unstretched = {**config, "shift_terminal": None}
    assert np.isfinite(model_sigmas(unstretched, 1, 0.8)).all()
