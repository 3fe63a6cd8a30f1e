"""CFG++ on LTX-2: each stream (the video and the soundtrack) steps along its own unconditional
output (the negative prompt's row of the forward), at its own guidance.

- A CFG++ sampler renders through the node and is not its plain sampler, on one pass and on
  the first of two (the refining pass, unguided, on a plain sampler).
- Its latents are the CFG++ step (`tests/families/cfg_pp_reference.py`, written out apart from
  the sigma library) run by hand on the transformer's own outputs of the same forwards: the
  guided clean estimate LTX2Pipeline makes (on x0, `guidance` / `audio_guidance`) and the
  negative row's. Stepping along the guided estimate instead (the uncond ignored) is plain euler,
  which the latents are far from.
- A CFG++ request beside a plain one shares forwards and renders what it renders alone.
- Where a stream or the refining pass runs unguided, a CFG++ sampler is a 422 at submit naming
  the param that picks it, and the request refuses it too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from ltx2_harness import (
    PROMPT,
    ltx2_rig,
    max_diff,
    node_params,
    render,
    take_audio,
    take_frames,
)
from test_ltx2_batching import SHAPE, assert_batched_equal_solo

from inline_core.errors import InvalidRequest
from inline_core.families.ltx2.kit import LTX2Kit
from inline_core.families.ltx2.request import new_request
from inline_core.graph.runner import SubmitFacts
from inline_core.sampling.loop import StepLoopSampler
from tests.families.batching_harness import solo_and_together
from tests.families.cfg_pp_reference import cfg_pp_step

GUIDED: dict[str, Any] = {"guidance": 3.0, "audio_guidance": 5.0, "negative_prompt": "static"}
STEPS = 3


def test_a_cfg_pp_sampler_renders_and_is_not_its_plain_sampler(
    ltx2_kit: LTX2Kit, ltx2_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    rig = ltx2_rig(ltx2_kit.root, ltx2_sampler)
    ours = render(rig, tmp_path / "a", sampler="euler_cfg_pp", steps=STEPS, **GUIDED)
    plain = render(rig, tmp_path / "b", sampler="euler", steps=STEPS, **GUIDED)
    frames, sound = take_frames(ours), take_audio(ours)
    assert frames.shape == (5, 32, 32, 3) and frames.std() > 1.0
    assert float(np.abs(sound.samples).max()) > 0.003  # a sound, not silence
    assert ours.takes[0].params["sampler"] == "euler_cfg_pp"
    moved = max_diff(frames, take_frames(plain))
    heard = float(np.abs(sound.samples - take_audio(plain).samples).max())
    # The tiny model's prompts barely differ, so the decoders shrink the change (the latents
    # show it, below); a render from the same path is equal bit for bit.
    assert moved > 0 and heard > 0


def test_a_cfg_pp_first_pass_runs_before_a_plain_refining_pass(
    ltx2_kit: LTX2Kit, ltx2_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    """With `upscale`, the guided first pass steps CFG++ and the unguided refining pass its own
    plain sampler (were it to run CFG++ there, it would find no unconditional output and fail)."""
    rig = ltx2_rig(ltx2_kit.root, ltx2_sampler)
    two_stage: dict[str, Any] = {**GUIDED, "upscale": True, "width": 64, "height": 64}
    two_stage.update(steps=STEPS, refine_sampler="euler")
    ours = render(rig, tmp_path / "a", sampler="euler_cfg_pp", **two_stage)
    plain = render(rig, tmp_path / "b", sampler="euler", **two_stage)
    frames = take_frames(ours)
    assert frames.shape == (5, 64, 64, 3) and frames.std() > 1.0
    assert ours.takes[0].params["refine_sampler"] == "euler"
    heard = float(np.abs(take_audio(ours).samples - take_audio(plain).samples).max())
    assert max_diff(frames, take_frames(plain)) > 0 or heard > 0


def final_latents(pipeline: Any, **request: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """A request's final (video, audio) latents, stepped through the step protocol alone."""
    state = pipeline.request(**request)
    pipeline.prepare_encode(state)
    while not state.done:
        (prediction,) = pipeline.denoise_step([state])
        pipeline.step_scheduler(state, prediction)
    return pipeline.post_latents(state)


def hand_run_cfg_pp(pipeline: Any, sampler: str, **request: Any) -> tuple[Any, Any]:
    """The CFG++ step run by hand on the transformer's raw outputs: the pipeline prepares the
    request and runs each forward (its sampler euler, never asked to step), this loop guides
    each stream on x0 as LTX2Pipeline does and steps it with `cfg_pp_step`."""
    outputs: list[Any] = []

    def record(_module: Any, _args: Any, out: Any) -> None:
        outputs.append(out)

    hook = pipeline.transformer.register_forward_hook(record)
    try:
        state = pipeline.request(sampler="euler", **request)
        pipeline.prepare_encode(state)
        sigmas: list[float] = state.schedule.stepper.sigmas
        scales = (state.guidance, state.audio_guidance)
        old: list[Any] = [None, None]
        for i in range(len(sigmas) - 1):
            pipeline.denoise_step([state])
            raw = outputs[-1]  # (video, audio), rows: the prompt's, then the negative's
            stepped: list[Any] = []
            for k, x in enumerate((state.latents, state.audio_latents)):
                out = raw[k].float()
                assert out.shape[0] == 2
                cond, uncond = x - sigmas[i] * out[:1], x - sigmas[i] * out[1:]
                denoised = cond + (scales[k] - 1) * (cond - uncond)
                stepped.append(
                    cfg_pp_step(sampler, x, sigmas, i, denoised, uncond, old[k], flow=True)
                )
                old[k] = uncond
            state.latents, state.audio_latents = stepped
            state.step_index += 1
        return pipeline.post_latents(state)
    finally:
        hook.remove()


@pytest.mark.parametrize("sampler", ["euler_cfg_pp", "dpmpp_2m_cfg_pp"])
def test_cfg_pp_is_the_hand_run_step_on_the_same_model_outputs(
    ltx2_kit: LTX2Kit, ltx2_sampler: StepLoopSampler, sampler: str
) -> None:
    pipeline = ltx2_rig(ltx2_kit.root, ltx2_sampler).pipeline()
    request = {**SHAPE, **GUIDED, "prompt": PROMPT, "seed": 5, "steps": STEPS}
    ours = final_latents(pipeline, sampler=sampler, **request)
    want = hand_run_cfg_pp(pipeline, sampler, **request)
    plain = final_latents(pipeline, sampler=sampler.removesuffix("_cfg_pp"), **request)
    for mine, theirs, euler in zip(ours, want, plain, strict=True):
        scale = float(theirs.abs().max())
        assert float((mine - theirs).abs().max()) <= 1e-5 * scale
        # The unconditional output moved it, a hundred times the match's bound: ignoring it
        # steps plain euler / dpmpp_2m.
        assert float((mine - euler).abs().max()) > 1e-3 * scale


def test_a_cfg_pp_request_beside_a_plain_one_renders_as_alone(ltx2_kit: LTX2Kit) -> None:
    sampler = StepLoopSampler(token_budget=4096)  # two rows of the kit's many tokens
    try:
        pipeline = ltx2_rig(ltx2_kit.root, sampler).pipeline()
        requests = [
            {**SHAPE, **GUIDED, "prompt": "a kite", "seed": 1, "steps": 3},
            {**SHAPE, **GUIDED, "prompt": "a train", "seed": 2, "steps": 3},
        ]
        requests[0]["sampler"] = "euler_cfg_pp"
        solo, together, stats = solo_and_together(sampler, pipeline, requests, lambda v: v)
    finally:
        sampler.close()
    assert stats["batchedForwards"] > 0 and stats["meanBatch"] > 1.0
    assert_batched_equal_solo(solo, together)


@pytest.mark.parametrize(
    ("params", "param", "says"),
    [
        ({"guidance": 1.0}, "sampler", "set guidance above 1"),
        ({"guidance": 4.0, "audio_guidance": 1.0}, "sampler", "set audio_guidance above 1"),
        ({"upscale": True, "refine_sampler": "euler_ancestral_cfg_pp"}, "refine_sampler", "pick"),
    ],
)
def test_cfg_pp_where_it_runs_unguided_is_refused_at_submit(
    ltx2_kit: LTX2Kit,
    ltx2_sampler: StepLoopSampler,
    params: dict[str, Any],
    param: str,
    says: str,
) -> None:
    rig = ltx2_rig(ltx2_kit.root, ltx2_sampler)
    params = {"sampler": "euler_cfg_pp", **params}
    with pytest.raises(InvalidRequest, match=rf"^param '{param}'") as raised:
        rig.check("l", node_params(**params), SubmitFacts.bare([]))
    assert says in raised.value.message and "unguided" in raised.value.message
    assert raised.value.node_id == "l"


def test_cfg_pp_on_a_guided_first_pass_before_a_plain_refining_pass_passes_the_check(
    ltx2_kit: LTX2Kit, ltx2_sampler: StepLoopSampler
) -> None:
    """Named, or left to LTX-2.0's template (euler_ancestral refining)."""
    rig = ltx2_rig(ltx2_kit.root, ltx2_sampler)
    for refine in ("euler", ""):
        params = node_params(sampler="euler_cfg_pp", upscale=True, refine_sampler=refine)
        rig.check("l", params, SubmitFacts.bare([]))


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"guidance": 1.0}, "set guidance and audio_guidance above 1"),
        ({"upscale": True, "refine_sampler": "dpmpp_2m_cfg_pp"}, "param 'refine_sampler'"),
    ],
)
def test_the_request_refuses_cfg_pp_where_it_runs_unguided(
    fields: dict[str, Any], says: str
) -> None:
    sizes = {"width": 64, "height": 64, "frames": 9, "steps": 2, "seed": 0}  # LTX-2's VAE's
    state = {"guidance": 4.0, "sampler": "euler_cfg_pp", **sizes, **fields}
    with pytest.raises(InvalidRequest, match="CFG\\+\\+") as raised:
        new_request("m", prompt="p", **state)
    assert says in raised.value.message
