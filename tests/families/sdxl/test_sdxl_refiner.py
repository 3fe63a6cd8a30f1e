"""The SDXL refiner: `stability/sdxl` with a refiner checkpoint picked renders what diffusers
renders with `StableDiffusionXLPipeline(denoising_end=f, output_type="latent")` handed to
`StableDiffusionXLImg2ImgPipeline(denoising_start=f)` over the refiner (its UNet, its OpenCLIP-G,
its aesthetic scores 6 and 2.5, its VAE decoding). A base checkpoint picked as the refiner and a
switch outside (0, 1) are refused at submit naming why; img2img hands over the same way, and
refiner requests batch with base ones. A refiner checkpoint whose prediction differs from the
base's (a `v_pred` marker on one alone) is refused at submit naming both, unless `prediction`
sets one for both; a v-prediction refiner after a v-prediction base, each told by its own marker,
renders diffusers' chain with both stages on v-prediction."""

from __future__ import annotations

import math
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from sdxl_harness import PROMPT, max_diff, node_params, render, sdxl_rig, start_noise, take_pixels
from test_sdxl_batching import assert_shared_and_each_alone, solo_and_together
from test_sdxl_img2img import render_img2img, source_image

from inline_core.contract.submit import Submit
from inline_core.diffusion.libs import diffusers, load_safetensors, save_safetensors
from inline_core.errors import InvalidRequest, ModelMissing
from inline_core.families.sdxl import SDXLFamily
from inline_core.families.sdxl.descriptor import NODE_TYPE, SDXL_DESCRIPTOR
from inline_core.families.sdxl.files import V_PRED_KEY
from inline_core.families.sdxl.kit import SDXLKit
from inline_core.families.sdxl.kit_refiner import build_refiner_unet
from inline_core.families.sdxl.schedule import DiscreteSchedule
from inline_core.models.catalog import Catalog
from inline_core.sampling.loop import StepLoopSampler

TOLERANCE = 2  # levels of 255: the CFG rows batched as two where diffusers runs one batch
EULER = {"sampler": "euler", "schedule": "ddim_uniform"}  # diffusers' Euler, "leading" spacing


def _refiner_pipe(base: Any) -> Any:
    """diffusers' refiner pipeline as Stability's refiner model_index sets it up: OpenCLIP-G
    alone, aesthetic scores on, the empty negative prompt encoded (not zeroed)."""
    g = base.text_encoder_2.config
    return diffusers().StableDiffusionXLImg2ImgPipeline(
        vae=base.vae,
        text_encoder=None,
        text_encoder_2=base.text_encoder_2,
        tokenizer=None,
        tokenizer_2=base.tokenizer_2,
        unet=build_refiner_unet(int(g.hidden_size), int(g.projection_dim)),
        scheduler=_euler(base),
        requires_aesthetics_score=True,
        force_zeros_for_empty_prompt=False,
    )


def _euler(base: Any, **config: Any) -> Any:
    """diffusers' Euler with the base's scheduler config, `config` in place of its own."""
    return diffusers().EulerDiscreteScheduler.from_config({**base.scheduler.config, **config})


def _reference(
    base: Any,
    refiner: Any,
    switch: float,
    config: dict[str, Any] | None = None,
    refiner_config: dict[str, Any] | None = None,
    **params: Any,
) -> Any:
    """The base's steps down to `switch` on Euler with `config`, then the refiner's with
    `refiner_config` (`config` where None)."""
    p = node_params(**params)
    scheduler = _euler(base, **(config or {}))
    scheduler.set_timesteps(p["steps"])
    first = float(scheduler.sigmas[0])
    # KSampler's first point below the model's largest sigma is `noise * sigma`, where
    # diffusers' Euler starts at `latents * sqrt(1 + sigma^2)` (test_sdxl_parity.py).
    latents = start_noise(p["seed"], p["width"], p["height"]) * (
        first / math.sqrt(1 + first * first)
    )
    common: dict[str, Any] = {
        "prompt": PROMPT,
        "negative_prompt": p["negative_prompt"],
        "num_inference_steps": p["steps"],
        "guidance_scale": p["guidance"],
    }
    own = base.scheduler
    base.scheduler = scheduler
    try:
        handed = base(
            **common,
            width=p["width"],
            height=p["height"],
            latents=latents,
            denoising_end=switch,
            output_type="latent",
        ).images
    finally:
        base.scheduler = own
    refiner.scheduler = _euler(base, **(config or {} if refiner_config is None else refiner_config))
    image = refiner(**common, image=handed, denoising_start=switch, output_type="np").images[0]
    return (np.asarray(image) * 255).round().astype(np.uint8).astype(np.int16)


@pytest.mark.parametrize(
    ("switch", "params"),
    [
        pytest.param(0.7, {"width": 64, "height": 64}, id="square-0.7"),
        pytest.param(0.5, {"width": 96, "height": 64, "guidance": 6.0}, id="wide-0.5"),
    ],
)
def test_base_then_refiner_matches_diffusers(
    sdxl_kit: SDXLKit,
    sdxl_sampler: StepLoopSampler,
    sdxl_reference: Any,
    tmp_path: Path,
    switch: float,
    params: dict[str, Any],
) -> None:
    assert sdxl_kit.refiner is not None
    params = {"steps": 5, **EULER, **params}
    rig = sdxl_rig(sdxl_kit.root, sdxl_sampler)
    picked = {"model": sdxl_kit.checkpoint_name, "refiner": sdxl_kit.refiner.name}
    result = render(rig, tmp_path, **picked, refiner_switch=switch, **params)
    ours = take_pixels(result)
    ref = _reference(sdxl_reference, _refiner_pipe(sdxl_reference), switch, **params)
    assert max_diff(ours, ref) <= TOLERANCE
    (take,) = result.takes
    assert take.params["refiner_switch"] == switch
    # The refiner's steps count: the base alone renders another picture.
    alone = take_pixels(render(rig, tmp_path, model=sdxl_kit.checkpoint_name, **params))
    assert max_diff(ours, alone) > 10


V_ZSNR = {"prediction_type": "v_prediction", "rescale_betas_zero_snr": True}


def test_the_refiner_samples_with_the_requests_prediction_and_zsnr(
    sdxl_kit: SDXLKit, sdxl_sampler: StepLoopSampler, sdxl_reference: Any, tmp_path: Path
) -> None:
    """ModelSamplingDiscrete's v_prediction and zsnr hold for the refiner's steps too: diffusers
    with both stages' Euler so configured renders the same picture."""
    assert sdxl_kit.refiner is not None
    params: dict[str, Any] = {"steps": 5, **EULER, "width": 64, "height": 64}
    rig = sdxl_rig(sdxl_kit.root, sdxl_sampler)
    picked = {"model": sdxl_kit.checkpoint_name, "refiner": sdxl_kit.refiner.name}
    overrides = {"prediction": "v_prediction", "zsnr": True, "refiner_switch": 0.6}
    ours = take_pixels(render(rig, tmp_path, **picked, **overrides, **params))
    refiner = _refiner_pipe(sdxl_reference)
    ref = _reference(sdxl_reference, refiner, 0.6, V_ZSNR, **params)
    assert max_diff(ours, ref) <= TOLERANCE
    # The check has teeth: the refiner's steps on its own epsilon Euler render another picture.
    own = _reference(sdxl_reference, refiner, 0.6, V_ZSNR, refiner_config={}, **params)
    assert max_diff(ours, own) > TOLERANCE


def _submitted(kit: SDXLKit, **params: Any) -> None:
    family = SDXLFamily(Catalog(kit.root, ttl_s=0.0), {})
    given: dict[str, Any] = {"model": kit.checkpoint_name, **params}
    picked = node_params(SDXL_DESCRIPTOR, **given)
    resolution = family.resolve(NODE_TYPE, picked)
    family.check(Submit(NODE_TYPE, picked, "x", resolution, frozenset(), {}, {}))
    resolution.require("x")


def test_a_base_checkpoint_given_as_the_refiner_is_refused(sdxl_kit: SDXLKit) -> None:
    with pytest.raises(ModelMissing, match="is not an SDXL refiner checkpoint") as refused:
        _submitted(sdxl_kit, refiner=sdxl_kit.checkpoint_name)
    assert refused.value.status == 422


@pytest.mark.parametrize("switch", [0.0, 1.0, 1.5])
def test_a_switch_outside_zero_one_is_refused(sdxl_kit: SDXLKit, switch: float) -> None:
    assert sdxl_kit.refiner is not None
    with pytest.raises(InvalidRequest, match="must be between 0 and 1") as refused:
        _submitted(sdxl_kit, refiner=sdxl_kit.refiner.name, refiner_switch=switch)
    assert refused.value.status == 422


@pytest.mark.parametrize("steps", [10, 20, 25, 30, 40])
def test_the_share_k_over_steps_is_step_k_on_the_normal_schedule(steps: int) -> None:
    """The import's `refiner_switch = k / steps` (ComfyUI's stages split at step k) hands the
    refiner the steps from k on, as diffusers' cutoff places them on the even schedule."""
    config = {"prediction_type": "epsilon"}
    for k in range(1, steps):
        schedule = DiscreteSchedule.create(
            config, steps, sampler="euler", schedule="normal", refiner_switch=k / steps
        )
        assert schedule.refiner_from == k, (steps, k)


def test_refiner_requests_share_forwards_and_each_equals_its_solo_render(
    sdxl_kit: SDXLKit,
) -> None:
    """Requests with the refiner (switching at different steps) and one without share the base's
    forwards, then the refiner's; each renders what it renders alone."""
    assert sdxl_kit.refiner is not None
    sampler = StepLoopSampler()
    try:
        rig = sdxl_rig(sdxl_kit.root, sampler)
        picked = {"model": sdxl_kit.checkpoint_name, "refiner": sdxl_kit.refiner.name}
        sources = rig.family.resolve(NODE_TYPE, picked).require()
        pipeline = rig.runtime.stacks().pipeline(rig.family, sources)
        base: dict[str, Any] = {"prompt": PROMPT, "width": 64, "height": 64, "steps": 5}
        base |= {"guidance": 5.0, **EULER}
        requests: list[dict[str, Any]] = [
            {**base, "seed": 1, "refiner_switch": 0.5},
            {**base, "seed": 2, "refiner_switch": 0.7},
            {**base, "seed": 3},
            {**base, "seed": 1, "refiner_switch": 0.5, "guidance": 1.0},
        ]
        solo, together, stats = solo_and_together(sampler, pipeline, requests)
    finally:
        sampler.close()
    assert_shared_and_each_alone(solo, together, stats)


def test_img2img_then_refiner_matches_diffusers(
    sdxl_kit: SDXLKit, sdxl_sampler: StepLoopSampler, sdxl_reference: Any, tmp_path: Path
) -> None:
    """An image wired in: the base runs img2img's steps above the switch (diffusers'
    `StableDiffusionXLImg2ImgPipeline(strength, denoising_end)`), the refiner the rest."""
    assert sdxl_kit.refiner is not None
    switch = 0.7
    params: dict[str, Any] = {"width": 64, "height": 64, "steps": 5, "strength": 0.8, **EULER}
    image = source_image(64, 64)
    rig = sdxl_rig(sdxl_kit.root, sdxl_sampler)
    picked = {"model": sdxl_kit.checkpoint_name, "refiner": sdxl_kit.refiner.name}
    ours = take_pixels(
        render_img2img(rig, tmp_path, image, **picked, refiner_switch=switch, **params)
    )
    p = node_params(**params)
    common: dict[str, Any] = {
        "prompt": PROMPT,
        "negative_prompt": p["negative_prompt"],
        "num_inference_steps": p["steps"],
        "guidance_scale": p["guidance"],
    }
    base = diffusers().StableDiffusionXLImg2ImgPipeline.from_pipe(sdxl_reference)
    base.scheduler = _euler(sdxl_reference)
    handed = base(
        **common,
        image=image,
        strength=p["strength"],
        generator=torch.Generator("cpu").manual_seed(p["seed"]),
        denoising_end=switch,
        output_type="latent",
    ).images
    refiner = _refiner_pipe(sdxl_reference)
    out = refiner(**common, image=handed, denoising_start=switch, output_type="np").images[0]
    ref = (np.asarray(out) * 255).round().astype(np.uint8).astype(np.int16)
    assert max_diff(ours, ref) <= TOLERANCE


V_REFINER = "refiner_vpred.safetensors"


def with_v_refiner(kit: SDXLKit, models: Path) -> SDXLKit:
    """The kit's models in `models`, with its refiner also saved carrying the v-prediction
    marker (`V_REFINER`)."""
    assert kit.refiner is not None
    shutil.copytree(kit.root, models, ignore=shutil.ignore_patterns("*diffusers*"))
    state = load_safetensors(kit.refiner)
    save_safetensors({**state, V_PRED_KEY: torch.zeros(0)}, models / "checkpoints" / V_REFINER)
    return replace(kit, root=models)


def vpred_base(kit: SDXLKit) -> str:
    assert kit.checkpoint is not None
    return kit.checkpoint.with_name(kit.checkpoint.stem + "_vpred.safetensors").name


@pytest.mark.parametrize(
    ("base", "refiner", "says"),
    [
        ("eps", "v", "predicts v_prediction and the base"),
        ("v", "eps", "predicts eps and the base"),
    ],
)
def test_a_refiner_of_another_prediction_is_refused_naming_both(
    sdxl_kit: SDXLKit, tmp_path: Path, base: str, refiner: str, says: str
) -> None:
    kit = with_v_refiner(sdxl_kit, tmp_path / "models")
    assert sdxl_kit.refiner is not None
    picked = {
        "model": vpred_base(kit) if base == "v" else kit.checkpoint_name,
        "refiner": V_REFINER if refiner == "v" else sdxl_kit.refiner.name,
    }
    with pytest.raises(InvalidRequest, match="does not mix them") as refused:
        _submitted(kit, **picked)
    assert refused.value.status == 422
    assert says in refused.value.message and repr(picked["model"]) in refused.value.message
    # ModelSamplingDiscrete's prediction set: both models sample with it, as the node says.
    _submitted(kit, **picked, prediction="v_prediction")


def test_a_v_refiner_after_a_v_base_matches_diffusers_chain_on_v_prediction(
    sdxl_kit: SDXLKit, sdxl_sampler: StepLoopSampler, sdxl_reference: Any, tmp_path: Path
) -> None:
    kit = with_v_refiner(sdxl_kit, tmp_path / "models")
    params: dict[str, Any] = {"steps": 5, **EULER, "width": 64, "height": 64}
    rig = sdxl_rig(kit.root, sdxl_sampler)
    picked = {"model": vpred_base(kit), "refiner": V_REFINER, "refiner_switch": 0.6}
    _submitted(kit, **picked)
    ours = take_pixels(render(rig, tmp_path, **picked, **params))
    refiner = _refiner_pipe(sdxl_reference)
    v = {"prediction_type": "v_prediction"}
    ref = _reference(sdxl_reference, refiner, 0.6, v, **params)
    assert max_diff(ours, ref) <= TOLERANCE
    # The check has teeth: the refiner's steps read as epsilon render another picture.
    misread = _reference(sdxl_reference, refiner, 0.6, v, refiner_config={}, **params)
    assert max_diff(ours, misread) > TOLERANCE
