"""CFG++ on Krea 2: the node renders `euler_cfg_pp` and `dpmpp_2m_cfg_pp` as diffusers'
Krea2Pipeline does with a hand-written CFG++ step in place of its scheduler's
(`tests/families/cfg_pp_reference.py`), and refuses them at submit where its guidance (Krea's
count, on above 0) runs no negative prompt."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from krea2_harness import node_call, render, rig

from inline_core.errors import InvalidRequest
from inline_core.families.krea2.kit import Krea2Kit
from inline_core.graph.runner import SubmitFacts
from inline_core.sampling.loop import StepLoopSampler
from tests.families.cfg_pp_reference import cfg_pp_scheduler

TOLERANCE = 1
SIZE: dict[str, Any] = {"width": 64, "height": 48}
STEPS, GUIDANCE = 6, 4.0


@pytest.mark.parametrize("sampler", ["euler_cfg_pp", "dpmpp_2m_cfg_pp"])
def test_cfg_pp_matches_a_hand_written_loop_on_the_krea2_pipeline(
    krea2_kit: Krea2Kit, krea_sampler: StepLoopSampler, krea_pipe: Any, tmp_path: Path, sampler: str
) -> None:
    import torch

    params: dict[str, Any] = {**SIZE, "steps": STEPS, "guidance": GUIDANCE, "seed": 4}
    ours = render(
        rig(krea2_kit, krea_sampler), tmp_path, "a fox", negative_prompt="blurry", sampler=sampler,
        **params,
    )  # fmt: skip
    with cfg_pp_scheduler(krea_pipe, sampler):
        ref = krea_pipe(
            prompt="a fox",
            negative_prompt="blurry",
            **SIZE,
            num_inference_steps=STEPS,
            guidance_scale=GUIDANCE,
            generator=torch.Generator("cpu").manual_seed(4),
        ).images[0]
    theirs = np.asarray(ref.convert("RGB"), dtype=np.int16)
    assert int(np.abs(ours - theirs).max()) <= TOLERANCE
    plain = render(
        rig(krea2_kit, krea_sampler), tmp_path, "a fox", negative_prompt="blurry",
        sampler=sampler.removesuffix("_cfg_pp"), **params,
    )  # fmt: skip
    assert int(np.abs(ours - plain).max()) > TOLERANCE  # the unconditional prediction was used


def test_cfg_pp_unguided_is_refused_at_submit(
    krea2_kit: Krea2Kit, krea_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    call = node_call(tmp_path, "a fox", sampler="euler_cfg_pp", guidance=0.0)
    node = rig(krea2_kit, krea_sampler).node()
    with pytest.raises(
        InvalidRequest, match=r"Krea 2: the CFG\+\+ sampler 'euler_cfg_pp' .* set guidance above 0"
    ):
        node.check_node("k", call.params, SubmitFacts.bare(["prompt"]))
