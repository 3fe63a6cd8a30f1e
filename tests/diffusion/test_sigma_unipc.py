"""The library's UniPC against diffusers' `UniPCMultistepScheduler` on a fixed toy model: both
variants, orders 1 to 3, epsilon and flow models, every model call's point and the result."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from inline_core.diffusion.libs import diffusers, to_floats
from inline_core.diffusion.sigma.algorithms.unipc import UniPC
from inline_core.diffusion.sigma.noise import NoNoise
from inline_core.diffusion.sigma.prediction import model_input
from inline_core.diffusion.sigma.sampling import DiscreteSampling, FlowSampling, ModelSampling
from inline_core.diffusion.sigma.stepper import SigmaStepper, call_sigmas


def toy(x: torch.Tensor) -> torch.Tensor:
    return 0.6 * torch.tanh(x) + 0.15 * x + 0.05


def start() -> torch.Tensor:
    return torch.randn((1, 4, 6, 6), generator=torch.Generator().manual_seed(7))


def ours(
    config: UniPC | str, sampling: ModelSampling, sigmas: list[float], x: torch.Tensor
) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Every point the model is called at, in the scheduler's space, and the result."""
    sampler = config.algorithm if isinstance(config, UniPC) else config
    stepper = SigmaStepper(sampler, sampling, sigmas, x, NoNoise())
    points: list[torch.Tensor] = []
    while stepper.result is None:
        point, sigma = stepper.call
        fed = model_input(sampling, point, sigma)
        points.append(fed)
        stepper.advance(toy(fed))
    return points, stepper.result


def theirs(s: Any, x: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
    points: list[torch.Tensor] = []
    for t in s.timesteps:
        points.append(x)
        x = s.step(toy(x), t, x, return_dict=False)[0]
    return points, x


def close(a: torch.Tensor, b: torch.Tensor, tol: float = 2e-5) -> None:
    err = float((a.double() - b.double()).abs().max())
    assert err <= tol * max(1.0, float(b.abs().max())), err


def eps_scheduler(variant: str, order: int, steps: int) -> Any:
    s = diffusers().UniPCMultistepScheduler(
        beta_start=0.00085,
        beta_end=0.012,
        beta_schedule="scaled_linear",
        solver_type=variant,
        solver_order=order,
        use_karras_sigmas=True,
        final_sigmas_type="zero",
    )
    s.set_timesteps(steps)
    return s


@pytest.mark.parametrize("order", [1, 2, 3])
@pytest.mark.parametrize("variant", ["bh1", "bh2"])
def test_eps_unipc_is_diffusers_unipc(variant: Any, order: int) -> None:
    s = eps_scheduler(variant, order, 9)
    sigmas = to_floats(s.sigmas.to(torch.float64))
    x = start() * (sigmas[0] ** 2 + 1) ** 0.5  # k-diffusion's x: diffusers' sample, unscaled
    points, result = ours(UniPC(variant, order), DiscreteSampling(), sigmas, x)
    their_points, their_result = theirs(s, x / (sigmas[0] ** 2 + 1) ** 0.5)
    assert len(points) == len(their_points) == 9
    for a, b in zip(points, their_points, strict=True):
        close(a, b)
    check_result(variant, result, their_result)


def check_result(variant: str, result: torch.Tensor, their_result: torch.Tensor) -> None:
    if variant == "bh2":
        close(result, their_result)
    else:  # bh1's B(h) = h is infinite on the step to 0: diffusers multiplies it by an absent
        # term and renders NaN; that step is the clean estimate (tested below)
        assert bool(torch.isnan(their_result).any())
        assert bool(torch.isfinite(result).all())


def flow_scheduler(variant: str, order: int, steps: int, final: str = "zero") -> Any:
    s = diffusers().UniPCMultistepScheduler(
        prediction_type="flow_prediction",
        use_flow_sigmas=True,
        flow_shift=3.0,
        solver_type=variant,
        solver_order=order,
        final_sigmas_type=final,
    )
    s.set_timesteps(steps)
    return s


@pytest.mark.parametrize("order", [1, 2, 3])
@pytest.mark.parametrize("variant", ["bh1", "bh2"])
def test_flow_unipc_is_diffusers_flow_unipc(variant: Any, order: int) -> None:
    s = flow_scheduler(variant, order, 8)
    sigmas = to_floats(s.sigmas.to(torch.float64))
    x = start()
    points, result = ours(UniPC(variant, order), FlowSampling(3.0), sigmas, x)
    their_points, their_result = theirs(s, x)
    assert len(points) == len(their_points) == 8
    for a, b in zip(points, their_points, strict=True):
        close(a, b)
    check_result(variant, result, their_result)
    if variant == "bh2" and order < 3:  # float32 in diffusers' order of operations
        assert torch.equal(result, their_result)


def test_the_last_step_to_zero_lands_on_the_clean_estimate() -> None:
    sampling = FlowSampling(3.0)
    sigmas = [0.9, 0.6, 0.3, 0.0]
    points, result = ours(UniPC("bh1"), sampling, sigmas, start())  # named uni_pc ends at 0.001
    last = points[-1]
    torch.testing.assert_close(result, last - sigmas[-2] * toy(last), atol=1e-6, rtol=0)


def test_a_flow_schedule_from_sigma_one_starts_where_diffusers_does() -> None:
    """Z-Image's own spacing starts at sigma 1, where the log-SNR is infinite; diffusers nudges
    the first sigma down by 1e-6 and so does the library's UniPC."""
    steps = 5
    s = flow_scheduler("bh2", 2, steps)
    s.set_timesteps(sigmas=np.linspace(1.0, 1 / steps, steps, dtype=np.float32))
    table = to_floats(s.sigmas.to(torch.float64))
    shifted = FlowSampling(3.0)
    given = [1.0, *table[1:]]
    unipc = UniPC("bh2")  # diffusers' order 2 (the named uni_pc_bh2 is ComfyUI's order 3)
    assert call_sigmas(unipc.algorithm, shifted, given)[0] == pytest.approx(table[0], abs=0)
    _, result = ours(unipc, shifted, given, start())
    close(result, theirs(s, start())[1])


def test_multistep_unipc_costs_one_call_a_step() -> None:
    sigmas = to_floats(flow_scheduler("bh2", 3, 12).sigmas.to(torch.float64))
    for name in ("uni_pc", "uni_pc_bh2"):
        assert len(call_sigmas(name, FlowSampling(3.0), sigmas)) == 12


def test_a_diffusers_config_maps_onto_its_unipc_or_is_refused() -> None:
    from inline_core.diffusion.flow.samplers import unipc_of_config

    config = dict(flow_scheduler("bh1", 3, 4).config)
    assert unipc_of_config(config) == UniPC("bh1", 3)
    for key, value in (("predict_x0", False), ("thresholding", True), ("solver_p", "x")):
        with pytest.raises(ValueError, match=key):
            unipc_of_config({**config, key: value})
    with pytest.raises(ValueError, match="disable_corrector"):
        unipc_of_config({**config, "disable_corrector": [0]})
