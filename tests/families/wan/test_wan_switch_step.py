"""`alibaba/wan`'s `switch_step` on Wan 2.2 A14B's pair: the experts switch at a given step, as
ComfyUI's two KSamplerAdvanced stages split them. diffusers switches where the timestep falls
below `boundary_ratio` x 1000, so a switch step k renders what `WanPipeline(transformer,
transformer_2, boundary_ratio=r)` renders for any r between the schedule's k-th and (k-1)-th
timesteps; the batch key follows the switch; a step outside 1..steps-1, or a switch on a
one-model stack, is refused at submit naming the param."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_wan_experts import HIGH, MAX_DIFFERING, STEPS, TOLERANCE, reference
from test_wan_server import wan_graph
from wan_harness import max_diff, node_params, render, submit_check, take_frames, wan_rig

from inline_core.errors import InvalidRequest
from inline_core.families.wan.kit import A14B_BOUNDARY, WanKit
from inline_core.families.wan.schedule import boundary_call
from inline_core.sampling.loop import StepLoopSampler

# 4 steps at shift 12: timesteps 1000, 973, 923, 800. Ratio 0.95 falls between 973 and 923,
# so diffusers runs two steps on the high-noise expert: switch_step 2 (the boundary's is 3).
RATIO_AT_2 = 0.95


def with_boundary(pipe: Any, ratio: float) -> Any:
    from diffusers import WanPipeline  # pyright: ignore[reportPrivateImportUsage]

    names = ("tokenizer", "text_encoder", "vae", "scheduler", "transformer", "transformer_2")
    other: Any = WanPipeline(**{n: getattr(pipe, n) for n in names}, boundary_ratio=ratio)
    other.set_progress_bar_config(disable=True)
    return other


@pytest.mark.parametrize(
    "params",
    [
        pytest.param({"guidance": 1.0}, id="nocfg"),
        pytest.param({"guidance": 4.0, "guidance_2": 2.0, "negative_prompt": "blurry"}, id="cfg2"),
    ],
)
def test_a_switch_step_renders_wan_pipeline_at_the_boundary_that_gives_it(
    wan_kit: WanKit,
    wan_sampler: StepLoopSampler,
    a14b_reference: Any,
    tmp_path: Path,
    params: dict[str, Any],
) -> None:
    pipe = with_boundary(a14b_reference, RATIO_AT_2)
    pipe.scheduler.set_timesteps(STEPS)
    timesteps: list[float] = pipe.scheduler.timesteps.tolist()
    assert boundary_call(timesteps, RATIO_AT_2) == 2
    assert A14B_BOUNDARY is not None and boundary_call(timesteps, A14B_BOUNDARY) == 3
    rig = wan_rig(wan_kit.root, wan_sampler)
    result = render(rig, tmp_path, model=HIGH, steps=STEPS, switch_step=2, **params)
    ours = take_frames(result)
    ref = reference(pipe, steps=STEPS, **params)
    assert max_diff(ours, ref) <= TOLERANCE
    assert float((ours != ref).mean()) <= MAX_DIFFERING
    at_boundary = reference(a14b_reference, steps=STEPS, **params)
    assert max_diff(ref, at_boundary) > 4 * TOLERANCE  # the switch moved
    (take,) = result.takes
    assert take.params["switch_step"] == 2 and take.params["boundary_ratio"] == A14B_BOUNDARY


def test_the_boundarys_own_step_renders_the_boundary_exactly(
    wan_kit: WanKit, wan_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    rig = wan_rig(wan_kit.root, wan_sampler)
    given = render(rig, tmp_path, model=HIGH, steps=STEPS, guidance=1.0, switch_step=3)
    empty = render(rig, tmp_path, model=HIGH, steps=STEPS, guidance=1.0)
    assert max_diff(take_frames(given), take_frames(empty)) == 0
    assert empty.takes[0].params["switch_step"] is None  # at the boundary ratio


@pytest.mark.parametrize(
    ("model", "switch", "expected"),
    [
        (HIGH, STEPS, "between 1 and steps - 1 (3), got 4"),
        (HIGH, 9, "between 1 and steps - 1 (3), got 9"),
        ("wan2.1_t2v_tiny_fp32.safetensors", 2, "this model has one expert"),
    ],
)
def test_a_bad_switch_step_is_refused_naming_it(
    wan_kit: WanKit, wan_sampler: StepLoopSampler, model: str, switch: int, expected: str
) -> None:
    family = wan_rig(wan_kit.root, wan_sampler).family
    params = node_params(model=model, steps=STEPS, switch_step=switch)
    with pytest.raises(InvalidRequest, match="'switch_step'") as raised:
        submit_check(family, params, {"prompt"})
    assert expected in raised.value.message


def test_the_server_refuses_a_bad_switch_step_and_switches_once_at_a_good_one(
    client: Any,
) -> None:
    from test_wan_server import submit

    refused = client.post(
        "/v1/runs", json={"graph": wan_graph(model=HIGH, steps=STEPS, switch_step=0), "target": "w"}
    )
    assert refused.status_code == 422, refused.text
    assert "switch_step" in refused.json()["error"]["message"]
    graph = wan_graph(model=HIGH, steps=STEPS, switch_step=STEPS, format="png")
    response = client.post("/v1/runs", json={"graph": graph, "target": "w"})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["nodeId"] == "w" and "'switch_step'" in error["message"]
    assert client.get("/v1/runs").json()["runs"] == []  # nothing was queued
    before = client.get("/v1/health").json()["sampler"]["batchKeyChanges"]
    state = submit(client, wan_graph(model=HIGH, steps=STEPS, switch_step=1, format="png"))
    assert state["status"] == "done", state
    assert state["takes"][0]["params"]["switch_step"] == 1
    after = client.get("/v1/health").json()["sampler"]["batchKeyChanges"]
    assert after == before + 1  # high-noise to low-noise at step 1, once
