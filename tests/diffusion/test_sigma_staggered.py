"""Samplers over slices that walk one schedule at their own pace (`sigma/staggered.py`), on a toy
model with a known answer: one span over the whole tensor is the ordinary stepper bit for bit,
noise included; staggered spans (diffusers' diffusion-forcing schedule over causal blocks) are
each the ordinary stepper walked by hand over that span's slice, with the same draws."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from inline_core.diffusion.flow.samplers import unipc_timesteps
from inline_core.diffusion.libs import diffusers
from inline_core.diffusion.sigma.algorithms.unipc import UniPC
from inline_core.diffusion.sigma.noise import RowNoise
from inline_core.diffusion.sigma.sampling import FlowSampling
from inline_core.diffusion.sigma.schedules import schedule_sigmas
from inline_core.diffusion.sigma.staggered import StaggeredSteppers, shared_spans
from inline_core.diffusion.sigma.stepper import SigmaStepper
from inline_core.graph.sampler_names import SIGMA_SAMPLERS

SAMPLING = FlowSampling(3.0)
SIGMAS = schedule_sigmas("simple", SAMPLING, 5)
SHAPE = (1, 2, 6, 3, 4)  # (batch, channels, frames, height, width)
TARGET = torch.linspace(-1.0, 1.0, 2 * 3 * 4).reshape(1, 2, 1, 3, 4)


def toy_velocity(x: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    """A flow model that knows its clean latent (`TARGET`) a little wrong: `noise - x0` from `x`
    at each frame's `sigma` (shaped to broadcast over the frame axis)."""
    x0 = TARGET + 0.1 * torch.tanh(x)
    return (x - x0) / sigma.clamp(min=1e-3)


def generator(seed: int = 3) -> torch.Generator:
    return torch.Generator("cpu").manual_seed(seed)


def start() -> torch.Tensor:
    return torch.randn(SHAPE, generator=generator(11))


def new_stepper(name: str, noise: RowNoise) -> SigmaStepper:
    return SigmaStepper(name, SAMPLING, SIGMAS, None, noise)


def pending(stepper: SigmaStepper) -> torch.Tensor:
    """The sigma of the stepper's next call."""
    return torch.tensor(stepper.call[1] if stepper.started else stepper.call_sigmas[0])


@pytest.mark.parametrize("name", SIGMA_SAMPLERS)
def test_one_span_over_the_tensor_is_the_ordinary_stepper_bit_for_bit(name: str) -> None:
    ordinary = new_stepper(name, RowNoise([generator()]))
    x = start()
    point = x.clone()
    while ordinary.result is None:
        seen = None if ordinary.started else point
        point = ordinary.advance(toy_velocity(point, pending(ordinary)), seen)

    noise = RowNoise([generator()])
    spans = StaggeredSteppers([(0, SHAPE[2])], lambda: new_stepper(name, noise), axis=2)
    for _ in range(ordinary.step_count):
        spans.advance(x, toy_velocity(x, pending(spans.steppers[0])), [True] * SHAPE[2])
    assert spans.steppers[0].result is not None
    assert torch.equal(x, point)


def forcing_schedule(calls: int, ar_step: int, prefix: int, block: int) -> tuple[Any, Any]:
    """diffusers' diffusion-forcing schedule over `calls` model calls a frame: each frame's call
    index per iteration (0: not started, calls + 1: done) and whether it steps."""
    pipeline = diffusers().SkyReelsV2DiffusionForcingPipeline
    template = torch.arange(calls, 0, -1)
    _levels, index, update, _spans = pipeline.generate_timestep_matrix(
        None, SHAPE[2], template, SHAPE[2], ar_step, prefix, block
    )
    return index.tolist(), update.tolist()


def test_shared_spans_are_the_causal_blocks_that_step_together() -> None:
    def spans(ar_step: int, prefix: int, block: int) -> list[tuple[int, int]]:
        index, update = forcing_schedule(5, ar_step, prefix, block)
        return shared_spans(update, index)

    assert spans(0, 0, 1) == [(0, 6)]  # synchronous: every frame at one level
    assert spans(0, 2, 2) == [(2, 6)]  # the clean prefix steps in none
    assert spans(2, 0, 2) == [(0, 2), (2, 4), (4, 6)]
    assert spans(1, 1, 1) == [(i, i + 1) for i in range(1, 6)]


@pytest.mark.parametrize("name", ["euler", "heun", "dpmpp_2m", "uni_pc_bh2", "euler_ancestral"])
@pytest.mark.parametrize(("ar_step", "prefix"), [(1, 0), (2, 2)])
def test_staggered_spans_are_each_the_ordinary_stepper_on_its_slice(
    name: str, ar_step: int, prefix: int
) -> None:
    block = 2
    calls = new_stepper(name, RowNoise([generator()])).step_count
    index, update = forcing_schedule(calls, ar_step, prefix, block)
    x = start()

    # By hand: one ordinary stepper per block, fed at its own call's sigma when it steps, the
    # blocks in order within an iteration (they draw from one generator in that order).
    ref_noise = RowNoise([generator()])
    ref = {b: new_stepper(name, ref_noise) for b in range(prefix, SHAPE[2], block)}
    expected = x.clone()
    for row in update:
        for b, stepper in ref.items():
            if row[b]:
                here = expected[:, :, b : b + block]
                seen = None if stepper.started else here.clone()
                here.copy_(stepper.advance(toy_velocity(here, pending(stepper)), seen))
    assert all(s.result is not None for s in ref.values())

    noise = RowNoise([generator()])
    spans = StaggeredSteppers(shared_spans(update, index), lambda: new_stepper(name, noise), 2)
    levels = [0.0, *new_stepper(name, noise).call_sigmas, 0.0]  # each call index's sigma
    for row, at in zip(update, index, strict=True):
        sigma = torch.tensor([levels[i] for i in at]).reshape(1, 1, -1, 1, 1)
        spans.advance(x, toy_velocity(x, sigma), row)
    assert torch.equal(x, expected)
    assert torch.equal(x[:, :, :prefix], start()[:, :, :prefix])  # the prefix never steps


def test_a_span_outside_the_forwards_window_is_refused() -> None:
    noise = RowNoise([generator()])
    spans = StaggeredSteppers([(0, 2), (2, 4)], lambda: new_stepper("euler", noise), axis=2)
    x = start()
    with pytest.raises(RuntimeError, match="outside the forward's window"):
        spans.advance(x, x[:, :, 3:], [True] * SHAPE[2], offset=3)


def test_first_correction_in_place_is_diffusers_unipc_stepping_a_view_of_its_latents() -> None:
    """diffusers' diffusion-forcing pipelines write each frame's step into the view they stepped,
    which its UniPC scheduler remembers as its last sample: its first correction starts from the
    point it predicted. `first_correction_in_place` is that render, bit for bit; without it, the
    library's UniPC is the scheduler's over a tensor of its own (another answer)."""
    config = {"prediction_type": "flow_prediction", "use_flow_sigmas": True, "flow_shift": 3.0}
    scheduler: Any = diffusers().UniPCMultistepScheduler(**config)
    scheduler.set_timesteps(4)
    sigmas = [float(s) for s in scheduler.sigmas]
    x = start()
    theirs = x.clone()
    for t in scheduler.timesteps:
        sigma = torch.tensor(float(t) / 1000)
        frame = theirs[:, :, :1]  # a view, stepped and written back as the pipeline does
        frame[:] = scheduler.step(toy_velocity(frame, sigma), t, frame, return_dict=False)[0]

    def ours(in_place: bool) -> torch.Tensor:
        algorithm = UniPC("bh2", 2, first_correction_in_place=in_place).algorithm
        stepper = SigmaStepper(algorithm, FlowSampling(3.0), sigmas, None, RowNoise([generator()]))
        timesteps = unipc_timesteps(stepper.call_sigmas, torch.device("cpu"))
        point = x[:, :, :1].clone()
        for t in timesteps:
            seen = None if stepper.started else point
            point = stepper.advance(toy_velocity(point, torch.tensor(float(t) / 1000)), seen)
        return point

    assert torch.equal(ours(True), theirs[:, :, :1])
    assert not torch.allclose(ours(False), theirs[:, :, 0], atol=1e-4)
