"""SD 1.5 on SDXL's code (`stability/sd15`): a take rendered through the node runner and the step
loop from the tiny all-in-one SD 1.5 checkpoint equals what diffusers' `StableDiffusionPipeline`
renders over the same weights, seed and params: epsilon and v-prediction (the `v_pred` marker),
Euler on SD's "leading" timesteps and DPM++ 2M Karras, square and not, CLIP's last layer and the
one before (through the final layer norm, as both read it)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from sdxl_harness import PROMPT, max_diff, node_params, render, start_noise, take_pixels

from inline_core.config import Config
from inline_core.diffusion.libs import diffusers, transformers
from inline_core.families.sdxl.kit import SCHEDULER_CONFIG, build_text_encoders
from inline_core.families.sdxl.kit_sd15 import SD15Kit, build_sd15_unet, build_sd15_vae
from inline_core.families.sdxl.sd15 import SD15_DESCRIPTOR, SD15Family
from inline_core.families.standalone import FamilyRig, family_rig
from inline_core.sampling.loop import StepLoopSampler

TOLERANCE = 2  # levels of 255: the CFG rows batched as two where diffusers runs one batch


def sd15_rig(kit: SD15Kit, sampler: StepLoopSampler) -> FamilyRig:
    config = Config(models_dir=kit.root, profile="cpu", dtype="float32")
    return family_rig(SD15Family, kit.root, sampler, config=config)


@pytest.fixture(scope="module")
def sd15_reference(sd15_kit: SD15Kit) -> Any:
    """diffusers' SD 1.5 pipeline over the kit's weights (rebuilt from the kit's seeds)."""
    tokenizer = transformers().CLIPTokenizer.from_pretrained(str(sd15_kit.tokenizer_dir))
    encoder = build_text_encoders()[0]
    # diffusers' clip_skip reads transformers 4's `text_model.final_layer_norm`; transformers
    # 5's CLIPTextModel is its own text model (a plain attribute, not a submodule).
    if not hasattr(encoder, "text_model"):
        encoder.__dict__["text_model"] = encoder
    pipe = diffusers().StableDiffusionPipeline(
        vae=build_sd15_vae(),
        text_encoder=encoder,
        tokenizer=tokenizer,
        unet=build_sd15_unet(),
        scheduler=diffusers().EulerDiscreteScheduler(**SCHEDULER_CONFIG),
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe


def _scheduler(kind: str, prediction: str) -> tuple[Any, float]:
    """diffusers' scheduler for the case, and the latents' scale that starts it where KSampler
    starts (`test_sdxl_parity.py` says why)."""
    config = {**SCHEDULER_CONFIG, "prediction_type": prediction}
    if kind == "dpm":
        dpm = diffusers().DPMSolverMultistepScheduler
        return dpm.from_config({**config, "use_karras_sigmas": True}), 1.0
    scheduler = diffusers().EulerDiscreteScheduler.from_config(config)
    return scheduler, 0.0


def _reference(pipe: Any, kind: str, prediction: str, p: dict[str, Any]) -> Any:
    import numpy as np

    scheduler, scale = _scheduler(kind, prediction)
    if not scale:
        scheduler.set_timesteps(p["steps"])
        first = float(scheduler.sigmas[0])
        scale = first / math.sqrt(1 + first * first)
    pipe.scheduler = scheduler
    # ComfyUI's layer -k is diffusers' clip_skip k - 1 (its -1, SD 1.5's own, is None).
    clip_skip = None if p["clip_skip"] == -1 else -p["clip_skip"] - 1
    # diffusers reads a negative prompt at its last layer whatever clip_skip says, where
    # CLIPSetLastLayer sets both: its own encode_prompt reads it at the same layer here.
    negative, _ = pipe.encode_prompt(p["negative_prompt"], "cpu", 1, False, clip_skip=clip_skip)
    image = pipe(
        prompt=PROMPT,
        negative_prompt_embeds=negative,
        width=p["width"],
        height=p["height"],
        num_inference_steps=p["steps"],
        guidance_scale=p["guidance"],
        latents=start_noise(p["seed"], p["width"], p["height"]) * scale,
        clip_skip=clip_skip,
        output_type="np",
    ).images[0]
    return (np.asarray(image) * 255).round().astype(np.uint8).astype(np.int16)


EULER = {"sampler": "euler", "schedule": "ddim_uniform"}
DPM = {"sampler": "dpmpp_2m", "schedule": "karras"}
CASES = [
    pytest.param("euler", "sd15_tiny.safetensors", EULER, id="euler-square"),
    pytest.param(
        "euler",
        "sd15_tiny.safetensors",
        {**EULER, "width": 96, "clip_skip": -2},
        id="euler-wide-skip",
    ),
    pytest.param("dpm", "sd15_tiny.safetensors", {**DPM, "height": 96}, id="dpmpp2m-karras-tall"),
    pytest.param("euler", "sd15_tiny_vpred.safetensors", EULER, id="euler-v-prediction"),
]


@pytest.mark.parametrize(("kind", "model", "params"), CASES)
def test_sd15_matches_diffusers(
    sd15_kit: SD15Kit,
    sdxl_sampler: StepLoopSampler,
    sd15_reference: Any,
    tmp_path: Path,
    kind: str,
    model: str,
    params: dict[str, Any],
) -> None:
    p = node_params(SD15_DESCRIPTOR, **{"steps": 4, "seed": 7, "guidance": 5.0, **params})
    p |= {"width": params.get("width", 64), "height": params.get("height", 64), "model": model}
    rig = sd15_rig(sd15_kit, sdxl_sampler)
    ours = take_pixels(render(rig, tmp_path, descriptor=SD15_DESCRIPTOR, **p))
    prediction = "v_prediction" if "vpred" in model else "epsilon"
    ref = _reference(sd15_reference, kind, prediction, p)
    assert ours.shape == (p["height"], p["width"], 3)
    assert max_diff(ours, ref) <= TOLERANCE
    assert ours.std() > 1.0  # a picture of noise, not a flat fill
