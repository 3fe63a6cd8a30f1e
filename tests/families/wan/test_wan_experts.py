"""Wan 2.2 A14B's two experts on the kit's tiny pair: a render equals diffusers'
`WanPipeline(transformer, transformer_2, boundary_ratio=...)` pixel for pixel (within the levels
`test_wan_parity.py` explains), with and without guidance and with `guidance_2` for the low-noise
expert, on both layouts; picking either file of a pair renders the pair; a missing sibling is a
`model_missing` naming it and where it goes."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from wan_harness import (
    PROMPT,
    max_diff,
    node_params,
    reference_kwargs,
    render,
    submit_check,
    take_frames,
)
from wan_harness import wan_rig as rig_of

from inline_core.errors import InvalidRequest, ModelMissing
from inline_core.families.wan.descriptor import NODE_TYPE
from inline_core.families.wan.experts import sibling_name
from inline_core.families.wan.kit import A14B_BOUNDARY, WanKit
from inline_core.sampling.loop import StepLoopSampler

TOLERANCE = 2  # levels of 255
MAX_DIFFERING = 0.01  # share of channel values allowed to differ at all
HIGH = "wan2.2_t2v_high_noise_tiny_fp32.safetensors"
LOW = "wan2.2_t2v_low_noise_tiny_fp32.safetensors"
FOLDER = "wan2.2_t2v_a14b_tiny_diffusers"
# 4 steps at the pair's shift 12: timesteps 1000, 973, 923, 800; the last is below the boundary
# (875), so three steps run on the high-noise expert and one on the low-noise one.
STEPS = 4
CASES = [
    pytest.param({"guidance": 1.0}, id="nocfg"),
    pytest.param({"guidance": 4.0, "negative_prompt": "blurry"}, id="cfg"),
    pytest.param({"guidance": 4.0, "guidance_2": 2.0, "width": 32, "height": 48}, id="cfg2-tall"),
]


def reference(pipe: Any, **params: Any) -> Any:
    import numpy as np

    kwargs = reference_kwargs(params)
    video = pipe(prompt=PROMPT, **kwargs).frames[0]
    return (np.asarray(video) * 255).round().astype(np.uint8).astype(np.int16)


# The low-noise file picks the same pair (`test_either_file_picks_the_pair_high_noise_first`).
@pytest.mark.parametrize("model", [HIGH, FOLDER], ids=["comfy", "diffusers"])
@pytest.mark.parametrize("params", CASES)
def test_the_pair_matches_wan_pipeline_with_both_experts(
    wan_kit: WanKit,
    wan_sampler: StepLoopSampler,
    a14b_reference: Any,
    tmp_path: Path,
    model: str,
    params: dict[str, Any],
) -> None:
    rig = rig_of(wan_kit.root, wan_sampler)
    result = render(rig, tmp_path, model=model, steps=STEPS, **params)
    ours = take_frames(result)
    ref = reference(a14b_reference, steps=STEPS, **params)
    assert ours.shape == (9, params.get("height", 32), params.get("width", 48), 3)
    assert max_diff(ours, ref) <= TOLERANCE
    assert float((ours != ref).mean()) <= MAX_DIFFERING
    assert ours.std() > 1.0  # frames of noise, not a flat fill
    (take,) = result.takes
    assert take.params["boundary_ratio"] == A14B_BOUNDARY
    assert take.params["guidance_2"] == params.get("guidance_2", params["guidance"])


def test_both_experts_shape_the_render(
    wan_kit: WanKit, wan_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    """The low-noise expert runs: the pair renders otherwise than its high-noise file would as
    a one-model stack, and guidance_2 changes only what the low-noise steps do."""
    models = tmp_path / "models"
    shutil.copytree(wan_kit.root, models)
    alone = models / "diffusion_models" / "wan2.2_t2v_solo_tiny_fp32.safetensors"
    shutil.copy(models / "diffusion_models" / HIGH, alone)  # no expert's name: one model
    rig = rig_of(models, wan_sampler)
    pair = take_frames(render(rig, tmp_path, model=HIGH, steps=STEPS, guidance=1.0, shift=12.0))
    solo = take_frames(
        render(rig, tmp_path, model=alone.name, steps=STEPS, guidance=1.0, shift=12.0)
    )
    assert max_diff(pair, solo) > 8
    guided = take_frames(render(rig, tmp_path, model=HIGH, steps=STEPS, guidance=3.0))
    guided_2 = take_frames(
        render(rig, tmp_path, model=HIGH, steps=STEPS, guidance=3.0, guidance_2=6.0)
    )
    assert max_diff(guided, guided_2) > 0


def test_either_file_picks_the_pair_high_noise_first(
    wan_kit: WanKit, wan_sampler: StepLoopSampler
) -> None:
    family = rig_of(wan_kit.root, wan_sampler).family
    for model in (HIGH, LOW):
        sources = family.resolve(NODE_TYPE, {"model": model}).require("w")
        assert sources.require("transformer").location.name == HIGH
        assert sources.require("transformer_2").location.name == LOW
        assert sources.model_name == model
    folder = family.resolve(NODE_TYPE, {"model": FOLDER}).require("w")
    assert folder.require("transformer_2").subfolder == "transformer_2"
    one = family.resolve(NODE_TYPE, {"model": "wan2.1_t2v_tiny_fp32.safetensors"}).require("w")
    assert one.get("transformer_2") is None


def test_sibling_names_swap_high_and_low_noise() -> None:
    assert sibling_name("wan2.2_t2v_high_noise_14B_fp16.safetensors") == (
        "wan2.2_t2v_low_noise_14B_fp16.safetensors"
    )
    assert sibling_name("Wan2.2-I2V-Low-Noise.safetensors") == "Wan2.2-I2V-High-Noise.safetensors"
    assert sibling_name("wan2.1_t2v_14B_fp16.safetensors") is None


@pytest.mark.parametrize("keep", [HIGH, LOW])
def test_a_missing_sibling_is_model_missing_naming_it_and_where_it_goes(
    wan_kit: WanKit, wan_sampler: StepLoopSampler, tmp_path: Path, keep: str
) -> None:
    models = tmp_path / "models"
    shutil.copytree(wan_kit.root, models)
    gone = LOW if keep == HIGH else HIGH
    (models / "diffusion_models" / gone).unlink()
    family = rig_of(models, wan_sampler).family
    with pytest.raises(ModelMissing) as raised:
        family.resolve(NODE_TYPE, {"model": keep}).require("w")
    message = raised.value.message
    label = "low-noise expert" if keep == HIGH else "high-noise expert"
    assert label in message and gone in message
    assert str(models / "diffusion_models") in message


def test_guidance_2_on_a_one_model_stack_is_refused_naming_it(
    wan_kit: WanKit, wan_sampler: StepLoopSampler
) -> None:
    family = rig_of(wan_kit.root, wan_sampler).family
    params = node_params(model="wan2.1_t2v_tiny_fp32.safetensors", guidance_2=3.0)
    with pytest.raises(InvalidRequest, match="'guidance_2'"):
        submit_check(family, params, {"prompt"})
    pair = node_params(model=HIGH, guidance_2=3.0)
    submit_check(family, pair, {"prompt"})  # the pair takes it


@pytest.mark.parametrize("model", [HIGH, FOLDER], ids=["comfy", "diffusers"])
def test_server_renders_the_pair_and_its_stats_show_the_switch(client: Any, model: str) -> None:
    from test_wan_server import submit, wan_graph

    before = client.get("/v1/health").json()["sampler"]["batchKeyChanges"]
    state = submit(client, wan_graph(model=model, steps=STEPS, guidance=3.0, guidance_2=2.0))
    assert state["status"] == "done", state
    (take,) = state["takes"]
    assert take["params"]["boundary_ratio"] == A14B_BOUNDARY
    assert take["params"]["guidance_2"] == 2.0
    health = client.get("/v1/health").json()
    assert health["sampler"]["batchKeyChanges"] == before + 1  # high-noise to low-noise, once
    # Both experts are the render's parts, resident together: the two transformers, the VAE,
    # the text encoder, its tokenizer and the scheduler config, each loaded once.
    residency = health["models"]["residency"]
    assert (residency["resident"], residency["loads"], residency["reloads"]) == (6, 6, 0)


def test_server_refuses_a_pair_missing_its_sibling_at_submit(
    wan_kit: WanKit, tmp_path: Path
) -> None:
    from fastapi.testclient import TestClient
    from test_wan_server import wan_graph

    from inline_core.config import Config
    from inline_core.server.app import create_app

    models = tmp_path / "models"
    shutil.copytree(wan_kit.root, models)
    (models / "diffusion_models" / LOW).unlink()
    config = Config(models_dir=models, data_dir=tmp_path / "data", profile="cpu", dtype="float32")
    with TestClient(create_app(config)) as client:
        response = client.post("/v1/runs", json={"graph": wan_graph(model=HIGH), "target": "w"})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "model_missing" and error["nodeId"] == "w"
    assert LOW in error["message"] and "low-noise expert" in error["message"]


def test_a_budget_smaller_than_the_pair_keeps_both_experts_without_reloads(
    wan_kit: WanKit, wan_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    """On a budget below the pair (1 MiB; bfloat16 copies of the float32 files are the
    residency's own bytes) the render still holds both experts (its keep-set), over budget, and
    a second render reloads nothing."""
    rig = rig_of(wan_kit.root, wan_sampler, ram_budget_gb=0.001, dtype="bfloat16")
    first = take_frames(render(rig, tmp_path, model=HIGH, steps=STEPS, guidance=1.0))
    again = take_frames(render(rig, tmp_path, model=HIGH, steps=STEPS, guidance=1.0))
    assert max_diff(first, again) == 0
    residency = rig.stats()
    assert residency["overBudget"] is True
    assert residency["reloads"] == 0 and residency["hits"] > 0
