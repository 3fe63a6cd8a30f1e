"""CFG++ on SDXL (an epsilon model): the node's `euler_cfg_pp` and `dpmpp_2m_cfg_pp` equal a
hand-written CFG++ loop on diffusers' UNet and VAE (ComfyUI's `sample_euler_cfg_pp` and
`sample_dpmpp_2m_cfg_pp`, written out in `tests/families/cfg_pp_reference.py`: land on the
guided clean estimate, renoise along the unconditional one), over the sigmas and timesteps
diffusers' own schedulers walk; and a CFG++ sampler without guidance is a 422 at submit."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sdxl_harness import PROMPT, max_diff, node_params, render, sdxl_rig, start_noise, take_pixels

from inline_core.diffusion.libs import diffusers
from inline_core.families.sdxl.kit import SDXLKit
from inline_core.sampling.loop import StepLoopSampler
from tests.families.cfg_pp_reference import cfg_pp_step
from tests.server.server_support import prompt_graph

TOLERANCE = 2  # levels of 255: float ordering in the UNet's batched rows
NEGATIVE = "blurry"


def _walk(pipe: Any, schedule: str, steps: int) -> tuple[list[float], list[float]]:
    """(sigmas ending at 0, timesteps) as diffusers walks `schedule`: `ddim_uniform` is Euler's
    "leading" spacing, `karras` DPM-Solver's Karras sigmas at rounded timesteps."""
    d = diffusers()
    if schedule == "ddim_uniform":
        scheduler: Any = d.EulerDiscreteScheduler.from_config(pipe.scheduler.config)
    else:
        scheduler = d.DPMSolverMultistepScheduler.from_config(
            pipe.scheduler.config, use_karras_sigmas=True
        )
    scheduler.set_timesteps(steps)
    return [float(s) for s in scheduler.sigmas], [float(t) for t in scheduler.timesteps]


def cfg_pp_reference(pipe: Any, sampler: str, schedule: str, **params: Any) -> Any:
    """The render's pixels from a hand-written CFG++ loop on diffusers' UNet and VAE."""
    import torch

    p = node_params(**params)
    sigmas, timesteps = _walk(pipe, schedule, p["steps"])
    top = float(
        ((1 - pipe.scheduler.alphas_cumprod[-1]) / pipe.scheduler.alphas_cumprod[-1]) ** 0.5
    )
    noise = start_noise(p["seed"], p["width"], p["height"])
    # KSampler's first point: the noise at the first sigma (its full variance at the top).
    x = noise * (math.sqrt(1 + sigmas[0] ** 2) if math.isclose(sigmas[0], top) else sigmas[0])
    with torch.no_grad():
        pos, neg, pooled, neg_pooled = pipe.encode_prompt(
            PROMPT, negative_prompt=NEGATIVE, do_classifier_free_guidance=True
        )
        h, w = p["height"], p["width"]
        time_ids = torch.tensor([[h, w, 0, 0, h, w]] * 2, dtype=torch.float32)
        added = {"text_embeds": torch.cat([neg_pooled, pooled]), "time_ids": time_ids}
        old_uncond = None
        for i, t in enumerate(timesteps):
            sigma = sigmas[i]
            seen = torch.cat([x, x]) / math.sqrt(sigma**2 + 1)
            eps_u, eps_c = pipe.unet(
                seen, t, torch.cat([neg, pos]), added_cond_kwargs=added
            ).sample.chunk(2)
            denoised = x - sigma * (eps_u + p["guidance"] * (eps_c - eps_u))
            uncond = x - sigma * eps_u
            x = cfg_pp_step(sampler, x, sigmas, i, denoised, uncond, old_uncond, flow=False)
            old_uncond = uncond
        image = pipe.vae.decode(x / pipe.vae.config.scaling_factor).sample
    pixels = pipe.image_processor.postprocess(image, output_type="np")[0]
    return (np.asarray(pixels) * 255).round().astype(np.uint8).astype(np.int16)


@pytest.mark.parametrize(
    ("sampler", "schedule"),
    [("euler_cfg_pp", "ddim_uniform"), ("dpmpp_2m_cfg_pp", "karras")],
)
def test_cfg_pp_matches_a_hand_written_loop_on_diffusers(
    sdxl_kit: SDXLKit,
    sdxl_sampler: StepLoopSampler,
    sdxl_reference: Any,
    tmp_path: Path,
    sampler: str,
    schedule: str,
) -> None:
    rig = sdxl_rig(sdxl_kit.root, sdxl_sampler)
    settings: dict[str, Any] = {"schedule": schedule, "negative_prompt": NEGATIVE}
    ours = take_pixels(render(rig, tmp_path, sampler=sampler, **settings))
    ref = cfg_pp_reference(sdxl_reference, sampler, schedule)
    assert max_diff(ours, ref) <= TOLERANCE
    plain = take_pixels(render(rig, tmp_path, sampler=sampler.removesuffix("_cfg_pp"), **settings))
    assert max_diff(ours, plain) > TOLERANCE  # the unconditional prediction was stepped along


def test_cfg_pp_without_guidance_is_refused_at_submit(
    client: TestClient, sdxl_kit: SDXLKit
) -> None:
    params: dict[str, Any] = {
        "model": sdxl_kit.checkpoint_name,
        "sampler": "euler_cfg_pp",
        "guidance": 1.0,
        "width": 64,
        "height": 64,
        "steps": 2,
    }
    graph = prompt_graph("stability/sdxl", "x", params, "a fox")
    response = client.post("/v1/runs", json={"graph": graph, "target": "x"})
    assert response.status_code == 422, response.text
    assert "set cfg above 1" in response.json()["error"]["message"]
