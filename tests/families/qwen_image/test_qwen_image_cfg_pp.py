"""CFG++ on Qwen-Image: the node renders `euler_cfg_pp` and `dpmpp_2m_cfg_pp` as diffusers'
QwenImagePipeline does with a hand-written CFG++ step in place of its scheduler's
(`tests/families/cfg_pp_reference.py`), its true CFG's norm rescale included in the guided
prediction, and an edit as QwenImageEditPlusPipeline does with that step; an unguided render
(true CFG at 1) refuses them at submit naming the model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from qwen_harness import (
    EDIT_MODEL,
    TEXT_MODEL,
    max_diff,
    node_params,
    qwen_rig,
    reference_image,
    render,
    small_references,
    source_image,
    take_pixels,
)

from inline_core.errors import InvalidRequest
from inline_core.families.qwen_image.kit import KitPaths
from inline_core.families.standalone import FamilyRig
from inline_core.graph.runner import SubmitFacts
from inline_core.sampling.loop import StepLoopSampler
from tests.families.cfg_pp_reference import cfg_pp_scheduler

TOLERANCE = 1  # the guided forward's two rows share one padded forward (diffusers runs two)
PARAMS: dict[str, Any] = {
    "width": 64,
    "height": 48,
    "steps": 8,
    "guidance": 20.0,  # the most it takes: the tiny model's prompts differ little
    "negative_prompt": "blurry",
    "model": TEXT_MODEL,
}


@pytest.fixture(scope="module")
def rig(qwen_kit: KitPaths, qwen_sampler: StepLoopSampler) -> Iterator[FamilyRig]:
    made = qwen_rig(qwen_kit.root, qwen_sampler)
    yield made
    made.close()


@pytest.mark.parametrize("sampler", ["euler_cfg_pp", "dpmpp_2m_cfg_pp"])
def test_cfg_pp_matches_a_hand_written_loop_on_the_qwen_image_pipeline(
    rig: FamilyRig, text_reference: Any, tmp_path: Path, sampler: str
) -> None:
    ours = take_pixels(render(rig, tmp_path, sampler=sampler, **PARAMS))
    with cfg_pp_scheduler(text_reference, sampler):
        theirs = reference_image(text_reference, **PARAMS)
    assert max_diff(ours, theirs) <= TOLERANCE
    plain = take_pixels(render(rig, tmp_path, sampler=sampler.removesuffix("_cfg_pp"), **PARAMS))
    assert max_diff(ours, plain) > TOLERANCE  # the unconditional prediction was stepped along


def test_an_edit_runs_cfg_pp_as_a_hand_written_loop_on_the_edit_pipeline(
    rig: FamilyRig, edit_reference: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small_references(monkeypatch)
    images = [source_image(40, 56, seed=1)]
    params: dict[str, Any] = {**PARAMS, "model": EDIT_MODEL, "steps": 3, "images": images}
    prompt = "make the sky green"
    ours = take_pixels(render(rig, tmp_path, prompt, sampler="dpmpp_2m_cfg_pp", **params))
    with cfg_pp_scheduler(edit_reference, "dpmpp_2m_cfg_pp"):
        theirs = reference_image(edit_reference, prompt, **params)
    assert max_diff(ours, theirs) <= TOLERANCE
    plain = take_pixels(render(rig, tmp_path, prompt, sampler="dpmpp_2m", **params))
    assert max_diff(ours, plain) > TOLERANCE  # the unconditional prediction was stepped along


def test_cfg_pp_unguided_is_refused_at_submit(rig: FamilyRig) -> None:
    params = node_params(model=TEXT_MODEL, sampler="euler_cfg_pp", guidance=1.0)
    with pytest.raises(
        InvalidRequest, match=r"Qwen-Image: the CFG\+\+ sampler 'euler_cfg_pp' .* above 1"
    ):
        rig.node().check_node("q", params, SubmitFacts.bare(["prompt"]))
