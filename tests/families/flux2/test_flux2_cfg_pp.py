"""CFG++ on FLUX.2 klein: a base model's node renders `euler_cfg_pp` and `dpmpp_2m_cfg_pp` as
diffusers' Flux2KleinPipeline does with a hand-written CFG++ step in place of its scheduler's
(`tests/families/cfg_pp_reference.py`); a step-distilled model, which runs no guidance, refuses
them at submit naming the model, and a base model refuses them unguided."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from flux2_harness import (
    make_rig,
    max_diff,
    node_params,
    pixels,
    reference_kwargs,
    render,
    take_pixels,
)

from inline_core.diffusion.libs import diffusers
from inline_core.errors import InvalidRequest
from inline_core.families.flux2.kit import Flux2Kit
from inline_core.families.flux2.kit_dev import Flux2DevKit
from inline_core.graph.runner import SubmitFacts
from inline_core.sampling.loop import StepLoopSampler
from tests.families.cfg_pp_reference import cfg_pp_scheduler

BASE, DISTILLED = "flux2_klein_base_tiny.safetensors", "flux2_klein_tiny.safetensors"
DEV = "flux2_dev_tiny_diffusers"
TOLERANCE = 1
STEPS = 8
GUIDANCE = (
    12.0  # large: the tiny model's prompts differ little, and CFG++ steps along that difference
)


@pytest.mark.parametrize("sampler_name", ["euler_cfg_pp", "dpmpp_2m_cfg_pp"])
def test_base_model_runs_cfg_pp_as_a_hand_written_loop_on_klein(
    flux2_kit: Flux2Kit,
    sampler: StepLoopSampler,
    klein_pipe: Any,
    tmp_path: Path,
    sampler_name: str,
) -> None:
    base: Any = diffusers().Flux2KleinPipeline(**klein_pipe.components, is_distilled=False)
    base.set_progress_bar_config(disable=True)
    rig = make_rig(flux2_kit.root, sampler)
    params: dict[str, Any] = {"steps": STEPS, "guidance": GUIDANCE, "model": BASE}
    ours = take_pixels(render(rig, tmp_path, "a cat", sampler=sampler_name, **params))
    with cfg_pp_scheduler(base, sampler_name):
        ref = base(prompt="a cat", **reference_kwargs(STEPS, GUIDANCE)).images[0]
    assert max_diff(ours, pixels(ref)) <= TOLERANCE
    plain = take_pixels(
        render(rig, tmp_path, "a cat", sampler=sampler_name.removesuffix("_cfg_pp"), **params)
    )
    assert max_diff(ours, plain) > TOLERANCE  # the unconditional prediction was stepped along


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"model": DISTILLED}, r"FLUX\.2 klein \S+ is step-distilled .* 'euler_cfg_pp'"),
        ({"model": BASE, "guidance": 1.0}, "set guidance above 1"),
    ],
    ids=["distilled", "base-unguided"],
)
def test_cfg_pp_without_an_unconditional_prediction_is_refused_at_submit(
    flux2_kit: Flux2Kit, sampler: StepLoopSampler, params: dict[str, Any], says: str
) -> None:
    node = make_rig(flux2_kit.root, sampler).node()
    submitted = node_params(sampler="euler_cfg_pp", **params)
    with pytest.raises(InvalidRequest, match=says):
        node.check_node("f", submitted, SubmitFacts.bare(["prompt"]))


def test_cfg_pp_on_dev_is_refused_at_submit(
    flux2_dev_kit: Flux2DevKit, sampler: StepLoopSampler
) -> None:
    """dev's guidance is an input of its transformer: one forward, no unconditional one."""
    node = make_rig(flux2_dev_kit.root, sampler).node()
    submitted = node_params(sampler="dpmpp_2m_cfg_pp", model=DEV)
    with pytest.raises(InvalidRequest, match=r"FLUX\.2 dev is guidance-distilled"):
        node.check_node("f", submitted, SubmitFacts.bare(["prompt"]))
