"""`alibaba/wan` samples with ComfyUI's samplers and schedules through the shared sigma library.

- `euler` on `normal` (a flow model's `normal` is diffusers' own flow spacing) equals diffusers'
  `WanPipeline` with a `FlowMatchEulerDiscreteScheduler` at the model's shift; `heun` on the A14B
  pair equals it with `FlowMatchHeunDiscreteScheduler`, whose two calls a step put the experts'
  switch inside a step (diffusers switches per call, by its timestep, as the node does).
- A CFG++ sampler equals `WanPipeline` stepping with the hand-written CFG++ step
  (`cfg_pp_reference.py`), and differs from plain CFG; one on unguided steps is refused.
- Requests with different samplers (one call a step or two, ancestral, multistep, CFG++, the
  model's own UniPC) share forwards and each renders what it renders alone.
- A `switch_step` is the first model call of that step, whatever calls the sampler makes a step.

Within the levels `test_wan_parity.py` explains.
"""

from __future__ import annotations

from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch
from test_wan_batching import SHAPE, assert_same, solo_and_together
from test_wan_experts import HIGH
from wan_harness import (
    PROMPT,
    first_frame_image,
    max_diff,
    node_params,
    reference_frames,
    reference_i2v_frames,
    render,
    submit_check,
    take_frames,
    wan_rig,
)

from inline_core.errors import InvalidRequest
from inline_core.families.wan.files import DEFAULT_SCHEDULER_CONFIG
from inline_core.families.wan.kit import A14B_SCHEDULER_CONFIG, TI2V_SCHEDULER_CONFIG, WanKit
from inline_core.families.wan.schedule import boundary_call, switch_call, wan_schedule
from inline_core.sampling.loop import StepLoopSampler
from tests.families.cfg_pp_reference import cfg_pp_scheduler

TOLERANCE = 2  # levels of 255
MAX_DIFFERING = 0.01  # share of channel values allowed to differ at all
T2V = ["wan2.1_t2v_tiny_fp32.safetensors", "wan2.1_t2v_tiny_diffusers"]
TI2V = "wan2.2_ti2v_tiny_fp32.safetensors"
TI2V_SHIFT = float(TI2V_SCHEDULER_CONFIG["flow_shift"])


@contextmanager
def scheduled(pipe: Any, class_name: str, shift: float) -> Generator[Any]:
    """`pipe` stepping with diffusers' flow scheduler `class_name` at `shift`, for a while."""
    import diffusers

    own = pipe.scheduler
    pipe.scheduler = getattr(diffusers, class_name)(shift=shift)
    try:
        yield pipe
    finally:
        pipe.scheduler = own


def final_latents(pipeline: Any, **request: Any) -> torch.Tensor:
    """A request's latents, stepped through the step protocol alone."""
    state = pipeline.request(**request)
    pipeline.prepare_encode(state)
    while not state.done:
        (prediction,) = pipeline.denoise_step([state])
        pipeline.step_scheduler(state, prediction)
    return pipeline.post_latents(state).value


@pytest.mark.parametrize("model", T2V, ids=["comfy", "diffusers"])
@pytest.mark.parametrize(
    "params",
    [
        pytest.param({"guidance": 1.0}, id="nocfg"),
        pytest.param({"guidance": 4.0, "negative_prompt": "blurry, static"}, id="cfg"),
    ],
)
def test_euler_matches_wan_pipeline_with_flow_match_euler(
    wan_kit: WanKit,
    wan_sampler: StepLoopSampler,
    wan_reference: Any,
    tmp_path: Path,
    model: str,
    params: dict[str, Any],
) -> None:
    rig = wan_rig(wan_kit.root, wan_sampler)
    result = render(rig, tmp_path, model=model, sampler="euler", schedule="normal", **params)
    ours = take_frames(result)
    shift = float(DEFAULT_SCHEDULER_CONFIG["flow_shift"])
    with scheduled(wan_reference, "FlowMatchEulerDiscreteScheduler", shift) as pipe:
        ref = reference_frames(pipe, **params)
    assert max_diff(ours, ref) <= TOLERANCE
    assert float((ours != ref).mean()) <= MAX_DIFFERING
    default = take_frames(render(rig, tmp_path, model=model, **params))
    assert max_diff(ours, default) > 4 * TOLERANCE  # not the model's own UniPC
    assert result.takes[0].params["sampler"] == "euler"
    assert result.takes[0].params["schedule"] == "normal"


def test_heun_on_the_pair_matches_wan_pipeline_switching_experts_inside_a_step(
    wan_kit: WanKit, wan_sampler: StepLoopSampler, a14b_reference: Any, tmp_path: Path
) -> None:
    shift = float(A14B_SCHEDULER_CONFIG["flow_shift"])
    cpu = torch.device("cpu")
    schedule = wan_schedule(A14B_SCHEDULER_CONFIG, 4, cpu, sampler="heun", schedule="normal")
    assert schedule.step_count == 7  # two calls a step, one for the last step to 0
    # Calls at 1000, 961, 961, 861, ...: the boundary (875) falls after step 1's first call.
    assert boundary_call([float(t) for t in schedule.timesteps], 0.875) == 3
    params: dict[str, Any] = {
        "guidance": 4.0,
        "guidance_2": 2.0,
        "negative_prompt": "blurry",
        "steps": 4,
    }
    rig = wan_rig(wan_kit.root, wan_sampler)
    ours = take_frames(
        render(rig, tmp_path, model=HIGH, sampler="heun", schedule="normal", **params)
    )
    with scheduled(a14b_reference, "FlowMatchHeunDiscreteScheduler", shift) as pipe:
        ref = reference_frames(pipe, **params)
    assert max_diff(ours, ref) <= TOLERANCE
    assert float((ours != ref).mean()) <= MAX_DIFFERING


@pytest.mark.parametrize("sampler", ["euler_cfg_pp", "dpmpp_2m_cfg_pp"])
def test_cfg_pp_matches_the_hand_written_step_on_wan_pipeline(
    wan_kit: WanKit,
    wan_sampler: StepLoopSampler,
    wan_reference: Any,
    tmp_path: Path,
    sampler: str,
) -> None:
    params: dict[str, Any] = {"guidance": 6.0, "negative_prompt": "blurry, static", "steps": 4}
    rig = wan_rig(wan_kit.root, wan_sampler)
    model = T2V[0]
    ours = take_frames(
        render(rig, tmp_path, model=model, sampler=sampler, schedule="normal", **params)
    )
    shift = float(DEFAULT_SCHEDULER_CONFIG["flow_shift"])
    with (
        scheduled(wan_reference, "FlowMatchEulerDiscreteScheduler", shift) as pipe,
        cfg_pp_scheduler(pipe, sampler),
    ):
        ref = reference_frames(pipe, **params)
    assert max_diff(ours, ref) <= TOLERANCE
    assert float((ours != ref).mean()) <= MAX_DIFFERING
    # CFG++ is not plain CFG: on this tiny model the prompts barely differ, so the VAE rounds
    # euler_cfg_pp's change away; the latents show it.
    pipeline = rig.pipeline()
    request = {**SHAPE, **params, "prompt": PROMPT, "seed": 11, "sigma_schedule": "normal"}
    plain = final_latents(pipeline, **request, sampler=sampler.removesuffix("_cfg_pp"))
    assert float((final_latents(pipeline, **request, sampler=sampler) - plain).abs().max()) > 1e-3


@pytest.mark.parametrize(
    ("model", "params", "names"),
    [
        (T2V[0], {"guidance": 1.0}, "guidance"),
        (HIGH, {"guidance": 4.0, "guidance_2": 1.0}, "guidance_2"),
    ],
)
def test_cfg_pp_on_unguided_steps_is_refused_at_submit_naming_them(
    wan_kit: WanKit, wan_sampler: StepLoopSampler, model: str, params: dict[str, Any], names: str
) -> None:
    family = wan_rig(wan_kit.root, wan_sampler).family
    with pytest.raises(InvalidRequest, match="CFG") as raised:
        submit_check(family, node_params(model=model, sampler="euler_cfg_pp", **params), set())
    assert f"set {names} above 1" in raised.value.message and "'euler'" in raised.value.message


def test_a_name_wan_does_not_run_is_refused_by_the_request(
    wan_kit: WanKit, wan_sampler: StepLoopSampler
) -> None:
    pipeline = wan_rig(wan_kit.root, wan_sampler).pipeline()
    base = {**SHAPE, "prompt": "p", "steps": 2, "guidance": 1.0, "seed": 1}
    with pytest.raises(InvalidRequest, match="unknown sampler 'dpm_fast'"):
        pipeline.request(**base, sampler="dpm_fast")
    with pytest.raises(InvalidRequest, match="unknown schedule 'ays'"):
        pipeline.request(**base, sigma_schedule="ays")


def test_requests_with_different_samplers_share_forwards_and_equal_their_solo_renders(
    wan_kit: WanKit,
) -> None:
    samplers = [
        ("", ""),  # the model's own UniPC on its own table
        ("heun", "karras"),  # two calls a step
        ("euler_ancestral", "simple"),  # fresh noise each step, from the request's seed
        ("dpmpp_2m_sde", "beta"),
        ("euler_cfg_pp", "normal"),
    ]
    requests = [
        {**SHAPE, "prompt": f"a kite {i}", "seed": i, "guidance": 3.0, "steps": 5,
         "sampler": sampler, "sigma_schedule": schedule}
        for i, (sampler, schedule) in enumerate(samplers)
    ]  # fmt: skip
    sampler = StepLoopSampler()
    try:
        pipeline = wan_rig(wan_kit.root, sampler).pipeline()
        solo, together, stats = solo_and_together(sampler, pipeline, requests)
    finally:
        sampler.close()
    assert stats["batchedForwards"] > 0 and stats["meanBatch"] > 1.0
    assert_same(solo, together)


@pytest.mark.parametrize(
    ("sampler", "calls_before"),
    [("", 2), ("euler", 2), ("heun", 4), ("dpm_2", 4), ("dpmpp_2m", 2)],
)
def test_a_switch_step_is_the_first_model_call_of_that_step(
    sampler: str, calls_before: int
) -> None:
    schedule = wan_schedule(A14B_SCHEDULER_CONFIG, 4, torch.device("cpu"), sampler=sampler)
    at = switch_call(schedule, 2)
    assert at == calls_before
    sigmas = schedule.stepper.sigmas
    assert float(schedule.levels[at]) == pytest.approx(sigmas[2])  # step 2's first call
    assert all(float(level) > sigmas[2] - 1e-7 for level in schedule.levels[:at])


def test_ti2v_image_to_video_on_euler_matches_its_pipeline_on_flow_match_euler(
    wan_kit: WanKit,
    wan_sampler: StepLoopSampler,
    ti2v_reference: Any,
    i2v_reference: Any,
    tmp_path: Path,
) -> None:
    """The 5B's per-token timesteps (the image's frame at 0) under another sampler, fed as
    floats: `WanImageToVideoPipeline` with `FlowMatchEulerDiscreteScheduler` at its shift."""
    params: dict[str, Any] = {"guidance": 4.0, "negative_prompt": "blurry", "width": 32,
                              "height": 32, "steps": 4}  # fmt: skip
    image = first_frame_image(50, 40)
    rig = wan_rig(wan_kit.root, wan_sampler)
    ours = take_frames(
        render(rig, tmp_path, image=image, model=TI2V, sampler="euler", schedule="normal",
               **params)
    )  # fmt: skip
    with scheduled(i2v_reference, "FlowMatchEulerDiscreteScheduler", TI2V_SHIFT) as pipe:
        ref = reference_i2v_frames(pipe, ti2v_reference, image, **params)
    assert max_diff(ours, ref) <= TOLERANCE
    assert float((ours != ref).mean()) <= MAX_DIFFERING
