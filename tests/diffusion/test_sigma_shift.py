"""A request's own flow shift (`diffusion/sigma/shift.py`) against ComfyUI's formulas: the sigmas
a flow family's schedule visits at ModelSamplingSD3/AuraFlow's `shift` and ModelSamplingFlux's
`mu`, whatever the model's own config shifts by."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from inline_core.diffusion.flow.schedule import FlowMatchSchedule
from inline_core.diffusion.sigma.shift import ModelShift, flux_mu

# A model shifted by itself: SD3's fixed shift 3 (Z-Image's config), and LTX-2's dynamic shift
# with a terminal stretch, which a request's own shift replaces too.
FIXED = {"shift": 3.0, "use_dynamic_shifting": False, "num_train_timesteps": 1000}
DYNAMIC = {
    "shift": 1.0,
    "use_dynamic_shifting": True,
    "base_shift": 0.95,
    "max_shift": 2.05,
    "shift_terminal": 0.1,
    "time_shift_type": "exponential",
    "num_train_timesteps": 1000,
}
CPU = torch.device("cpu")


def levels(config: dict[str, object], steps: int, shift: ModelShift, schedule: str) -> list[float]:
    made = FlowMatchSchedule.create(config, steps, 1024, CPU, schedule=schedule, shift=shift)
    return [float(s) for s in made.stepper.sigmas]


def comfy_sd3(shift: float, t: float) -> float:
    """ComfyUI's `time_snr_shift` (ModelSamplingDiscreteFlow)."""
    if shift == 1.0:
        return t
    return shift * t / (1 + (shift - 1) * t)


def comfy_flux(mu: float, t: float) -> float:
    """ComfyUI's `flux_time_shift` at sigma 1 (ModelSamplingFlux)."""
    return math.exp(mu) / (math.exp(mu) + (1 / t - 1) ** 1.0)


def comfy_simple(table: list[float], steps: int) -> list[float]:
    """ComfyUI's `simple_scheduler` over a model sampling's sigma table."""
    stride = len(table) / steps
    return [table[-(1 + int(x * stride))] for x in range(steps)] + [0.0]


def comfy_karras(sigma_min: float, sigma_max: float, steps: int, rho: float = 7.0) -> list[float]:
    """k-diffusion's `get_sigmas_karras`, as ComfyUI's `karras` calls it on the table's range."""
    ramp = np.linspace(0, 1, steps)
    lo, hi = sigma_min ** (1 / rho), sigma_max ** (1 / rho)
    return [float(s) for s in (hi + ramp * (lo - hi)) ** rho] + [0.0]


@pytest.mark.parametrize("config", [FIXED, DYNAMIC], ids=["fixed", "dynamic"])
@pytest.mark.parametrize("shift", [1.0, 1.73, 6.0, 12.0])
def test_an_sd3_shift_is_comfyuis_schedule(config: dict[str, object], shift: float) -> None:
    table = [comfy_sd3(shift, t / 1000) for t in range(1, 1001)]
    for steps in (4, 8, 20):  # steps that divide the table: `simple` is ComfyUI's exactly
        ours = levels(config, steps, ModelShift(shift=shift), "simple")
        np.testing.assert_allclose(ours, comfy_simple(table, steps), atol=2e-7)
    ours = levels(config, 9, ModelShift(shift=shift), "karras")
    np.testing.assert_allclose(ours, comfy_karras(table[0], table[-1], 9), rtol=2e-6)


@pytest.mark.parametrize("config", [FIXED, DYNAMIC], ids=["fixed", "dynamic"])
@pytest.mark.parametrize("mu", [0.5, 1.15, 2.4])
def test_a_flux_mu_is_comfyuis_schedule(config: dict[str, object], mu: float) -> None:
    table = [comfy_flux(mu, t / 10000) for t in range(1, 10001)]
    for steps in (4, 10, 25):
        ours = levels(config, steps, ModelShift(mu=mu), "simple")
        np.testing.assert_allclose(ours, comfy_simple(table, steps), atol=2e-7)
    ours = levels(config, 7, ModelShift(mu=mu), "karras")
    np.testing.assert_allclose(ours, comfy_karras(table[0], table[-1], 7), rtol=2e-6)


@pytest.mark.parametrize(
    ("max_shift", "base_shift", "width", "height"),
    [(1.15, 0.5, 1024, 1024), (1.15, 0.5, 512, 768), (2.0, 0.25, 1344, 768), (0.5, 1.15, 64, 64)],
)
def test_flux_mu_is_comfyuis_model_sampling_flux(
    max_shift: float, base_shift: float, width: int, height: int
) -> None:
    # ComfyUI's ModelSamplingFlux.patch, line for line.
    x1, x2 = 256, 4096
    mm = (max_shift - base_shift) / (x2 - x1)
    b = base_shift - mm * x1
    shift = (width * height / (8 * 8 * 2 * 2)) * mm + b
    assert flux_mu(max_shift, base_shift, width, height) == shift


def test_a_shift_and_a_mu_at_once_or_no_shift_are_refused() -> None:
    with pytest.raises(ValueError, match="two shifts of one schedule"):
        ModelShift(shift=3.0, mu=1.0)
    with pytest.raises(ValueError, match="must be above 0"):
        ModelShift(shift=0.0)
    assert ModelShift.of(None, None) is None
