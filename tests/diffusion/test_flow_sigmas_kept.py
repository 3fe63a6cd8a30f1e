"""A flow model's `simple` sigmas are diffusers' scheduler's, computed once per settings: a render
at settings seen before reads them back, bit for bit what a fresh scheduler sets
(`diffusion/flow/samplers.py`)."""

from __future__ import annotations

from typing import Any

import pytest

from inline_core.diffusion.flow import samplers
from inline_core.diffusion.flow.samplers import flow_spacing, model_sigmas, numpy_flow_spacing
from inline_core.diffusion.libs import diffusers, to_floats

CONFIG: dict[str, Any] = {"num_train_timesteps": 1000, "shift": 3.0, "use_dynamic_shifting": False}


def fresh(config: dict[str, Any], steps: int, mu: float, spacing: samplers.Spacing) -> list[float]:
    scheduler = diffusers().FlowMatchEulerDiscreteScheduler.from_config(config)
    scheduler.set_timesteps(sigmas=spacing(steps), mu=mu)
    return to_floats(scheduler.sigmas)


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The step counts a scheduler was built for (the real one is)."""
    steps: list[int] = []
    real = samplers.scheduler_sigmas

    def counted(config: Any, n: int, mu: float, spacing: samplers.Spacing) -> tuple[float, ...]:
        steps.append(n)
        return real(config, n, mu, spacing)

    monkeypatch.setattr(samplers, "scheduler_sigmas", counted)
    return steps


@pytest.mark.parametrize("spacing", [flow_spacing, numpy_flow_spacing])
def test_sigmas_read_back_are_a_fresh_schedulers(
    built: list[int], spacing: samplers.Spacing
) -> None:
    config = {**CONFIG, "shift": 2.875}  # settings no other test renders at
    first = model_sigmas(config, 7, 0.5, spacing=spacing)
    again = model_sigmas(config, 7, 0.5, spacing=spacing)
    assert first == again == fresh(config, 7, 0.5, spacing)
    assert built == [7]  # the scheduler was built for the first call only


def test_other_settings_are_computed_anew(built: list[int]) -> None:
    base = model_sigmas(CONFIG, 9, 0.5)
    shifted = model_sigmas({**CONFIG, "shift": 6.0}, 9, 0.5)
    assert shifted != base and shifted == fresh({**CONFIG, "shift": 6.0}, 9, 0.5, flow_spacing)
    dynamic = {**CONFIG, "use_dynamic_shifting": True}
    assert model_sigmas(dynamic, 9, 0.5) != model_sigmas(dynamic, 9, 1.0)


def test_a_callers_own_spacing_is_run_each_time(built: list[int]) -> None:
    given = [1.0, 0.6, 0.2]
    for _ in range(2):
        assert model_sigmas(CONFIG, 3, 0.5, spacing=lambda _n: list(given)) == fresh(
            CONFIG, 3, 0.5, lambda _n: list(given)
        )
    assert built == [3, 3]
