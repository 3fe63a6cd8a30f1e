"""The node's `sampler` and `schedule` on the tiny SkyReels-V2 kit: each run of frames at one level
walks its own sampler from the sigma library (`diffusion/sigma/staggered.py`).

- With the diffusion-forcing schedule degenerate (one chunk, `ar_step` 0: every frame at one
  level), a render's latents equal the same sampler walked by hand through the ordinary path (one
  `SigmaStepper` over the whole latent, feeding the transformer itself), bit for bit: the step
  protocol and the reference run in this thread. Ancestral noise included: it is drawn from the
  request's own seeded generator, the ordinary path's.
- Samplers render different videos from each other and from the model's own UniPC (the default,
  whose parity with diffusers is `test_skyreels_parity.py`); an ancestral render is its seed's,
  the same again; a staggered render (`ar_step` above 0) equals batched and alone (the shared
  batching harness: an ancestral and a multistep request share forwards).
- Every sampler and schedule of the library runs per frame (a staggered render, finite).
- A CFG++ sampler steps along the unconditional prediction where guidance is above 1; at 1 the
  request is refused naming it (at submit, a 422: `test_skyreels_comfy_import.py`, with the names
  the library does not have).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
import torch
from skyreels_harness import PROMPT, SMALL, skyreels_rig, take_frames, video_frames
from skyreels_harness import render as render_node

from inline_core.diffusion.flow.samplers import model_sigmas, numpy_flow_spacing
from inline_core.diffusion.sigma.noise import RowNoise, row_generator
from inline_core.diffusion.sigma.sampling import FlowSampling
from inline_core.diffusion.sigma.stepper import SigmaStepper
from inline_core.errors import InvalidRequest
from inline_core.families.skyreels.files import DEFAULT_SHIFT
from inline_core.families.skyreels.kit import FOLDER, SkyReelsKit
from inline_core.families.skyreels.pipeline import fps_class
from inline_core.graph.sampler_names import GUIDED_SAMPLERS, SCHEDULES
from inline_core.sampling.loop import StepLoopSampler
from tests.families.batching_harness import assert_batched_equals_alone, solo_and_together

REQUEST: dict[str, Any] = {"prompt": PROMPT, **SMALL, "guidance": 1.0, "format": "png"}
SAMPLERS = ["euler", "dpmpp_2m", "uni_pc", "uni_pc_bh2", "euler_ancestral", "heun"]


def render_latents(pipeline: Any, **params: Any) -> torch.Tensor:
    """The request's latents, its steps driven in this thread through the step protocol."""
    state = pipeline.prepare_encode(pipeline.request(**{**REQUEST, **params}))
    while not state.done:
        (prediction,) = pipeline.denoise_step([state])
        pipeline.step_scheduler(state, prediction)
    return cast(torch.Tensor, pipeline.post_latents(state).value)


def by_hand(pipeline: Any, sampler: str, schedule: str) -> torch.Tensor:
    """The same render through the ordinary path: one stepper over the whole latent, from the
    request's starting noise, feeding the transformer every frame at the sampler's own level."""
    state = pipeline.prepare_encode(pipeline.request(**REQUEST))
    x = cast(torch.Tensor, state.latents).clone()
    flow = {"shift": DEFAULT_SHIFT, "num_train_timesteps": 1000}
    sigmas = model_sigmas(flow, REQUEST["steps"], 0.0, schedule, numpy_flow_spacing)
    noise = RowNoise([row_generator(REQUEST["seed"])])
    stepper = SigmaStepper(sampler, FlowSampling(DEFAULT_SHIFT), sigmas, None, noise)
    levels = stepper.call_sigmas
    timesteps = torch.tensor(levels, dtype=torch.float32) * 1000  # uni_pc too, as ComfyUI feeds it
    frames = x.shape[2]
    with torch.inference_mode():
        for t in timesteps:
            output = pipeline.transformer(
                hidden_states=x,
                timestep=t.repeat(1, frames),
                encoder_hidden_states=state.positive.value.unsqueeze(0),
                enable_diffusion_forcing=True,
                fps=[fps_class(state.fps)],
                return_dict=False,
            )[0]
            x = stepper.advance(output, None if stepper.started else x)
    assert stepper.result is not None
    return x


@pytest.fixture(scope="module")
def pipeline(skyreels_kit: SkyReelsKit, skyreels_sampler: StepLoopSampler) -> Any:
    return skyreels_rig(skyreels_kit.root, skyreels_sampler).pipeline(FOLDER)


@pytest.mark.parametrize(
    ("sampler", "schedule"),
    [
        ("euler", "simple"),
        ("dpmpp_2m", "karras"),
        ("uni_pc", "simple"),
        ("uni_pc_bh2", "beta"),
        ("euler_ancestral", "simple"),
        ("heun", "normal"),
    ],
)
def test_one_level_for_every_frame_is_the_ordinary_path_bit_for_bit(
    pipeline: Any, sampler: str, schedule: str
) -> None:
    ours = render_latents(pipeline, sampler=sampler, sigma_schedule=schedule)
    assert torch.equal(ours, by_hand(pipeline, sampler, schedule))


def test_samplers_render_different_videos_each_reproducible(pipeline: Any) -> None:
    default = render_latents(pipeline)
    rendered = {name: render_latents(pipeline, sampler=name) for name in SAMPLERS}
    names = ["", *SAMPLERS]
    latents = [default, *rendered.values()]
    for i, a in enumerate(latents):
        assert torch.isfinite(a).all()
        for j in range(i + 1, len(latents)):
            gap = float((a - latents[j]).abs().max())
            assert gap > 1e-3, (names[i], names[j], gap)
    # The ancestral sampler's noise comes from the request's seed: the same again, another seed
    # another video.
    again = render_latents(pipeline, sampler="euler_ancestral")
    assert torch.equal(again, rendered["euler_ancestral"])
    other = render_latents(pipeline, sampler="euler_ancestral", seed=REQUEST["seed"] + 1)
    assert float((other - again).abs().max()) > 1e-3


def test_cfg_pp_steps_along_the_unconditional_prediction(pipeline: Any) -> None:
    guided: dict[str, Any] = {"guidance": 3.0, "negative_prompt": "blurry"}
    plain = render_latents(pipeline, sampler="euler", **guided)
    cfg_pp = render_latents(pipeline, sampler="euler_cfg_pp", **guided)
    assert torch.isfinite(cfg_pp).all()
    assert float((plain - cfg_pp).abs().max()) > 1e-3
    with pytest.raises(InvalidRequest, match="euler_cfg_pp"):
        pipeline.request(**{**REQUEST, "sampler": "euler_cfg_pp"})


def test_staggered_blocks_with_their_own_samplers_equal_batched_and_alone(
    skyreels_kit: SkyReelsKit,
) -> None:
    """Asynchronous (`ar_step` 1, blocks of one latent frame): each frame its own sampler. Two
    requests, an ancestral and a multistep sampler, share forwards and each equals its alone."""
    shape: dict[str, Any] = {**REQUEST, "frames": 13, "ar_step": 1}
    requests = [
        {**shape, "sampler": "euler_ancestral", "sigma_schedule": "karras"},
        {**shape, "sampler": "dpmpp_2m", "seed": 9, "prompt": "a kite over the sea"},
    ]
    sampler = StepLoopSampler()
    try:
        pipeline: Any = skyreels_rig(skyreels_kit.root, sampler).pipeline(FOLDER)
        solo, together, stats = solo_and_together(sampler, pipeline, requests, video_frames)
    finally:
        sampler.close()
    assert_batched_equals_alone(solo, together, stats, tolerance=2, max_differing=0.01)
    assert int(np.abs(solo[0] - solo[1]).max()) > 10


def test_the_node_takes_sampler_and_schedule_and_refuses_what_does_not_run(
    skyreels_kit: SkyReelsKit, skyreels_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    rig = skyreels_rig(skyreels_kit.root, skyreels_sampler)
    default = take_frames(render_node(rig, tmp_path, guidance=1.0))
    named = take_frames(
        render_node(rig, tmp_path, guidance=1.0, sampler="dpmpp_2m", schedule="karras")
    )
    assert default.shape == named.shape
    assert int(np.abs(default - named).max()) > 10


@pytest.mark.parametrize("sampler", GUIDED_SAMPLERS)
def test_every_sampler_runs_per_frame_on_a_staggered_render(pipeline: Any, sampler: str) -> None:
    """Each frame its own sampler (`ar_step` 1, blocks of one latent frame), guided so the CFG++
    ones have their unconditional prediction: a finite video."""
    params: dict[str, Any] = {"steps": 2, "ar_step": 1, "guidance": 2.0, "sampler": sampler}
    assert torch.isfinite(render_latents(pipeline, **params)).all()


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_every_schedule_runs_per_frame_on_a_staggered_render(pipeline: Any, schedule: str) -> None:
    params: dict[str, Any] = {"steps": 3, "ar_step": 1, "sigma_schedule": schedule}
    assert torch.isfinite(render_latents(pipeline, sampler="dpmpp_2m", **params)).all()
