"""A flow schedule's sigmas and model sampling are worked out once per settings (not per seed,
sampler or prompt) and each render gets its own copies: what one render's schedule is made of,
changed in place, cannot reach the next (`diffusion/flow/schedule.py`)."""

from __future__ import annotations

from typing import Any, cast

import pytest
import torch

from inline_core.diffusion.flow import schedule as flow_schedule
from inline_core.diffusion.flow.schedule import FlowMatchSchedule, SchedulePlan
from inline_core.diffusion.libs import to_floats
from inline_core.diffusion.sigma.sampling import FlowSampling
from inline_core.diffusion.sigma.shift import ModelShift
from inline_core.diffusion.sigma.window import StepWindow
from inline_core.kept import Kept

CPU = torch.device("cpu")
CONFIG: dict[str, Any] = {"num_train_timesteps": 1000, "shift": 3.0, "use_dynamic_shifting": False}
DYNAMIC: dict[str, Any] = {**CONFIG, "use_dynamic_shifting": True, "time_shift_type": "exponential"}
SETTINGS: list[dict[str, Any]] = [
    {},
    {"strength": 0.6},
    {"denoise": 0.5, "schedule": "karras"},
    {"window": StepWindow(start=1, end=3, leftover_noise=True)},
    {"shift": ModelShift(shift=2.0)},
    {"config": DYNAMIC, "mu": 0.7},
]


@pytest.fixture
def worked_out(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """An empty store of kept plans, and the step counts each plan was worked out for (by the
    real code)."""
    monkeypatch.setattr(flow_schedule, "PLANS", Kept[Any, Any](64))
    steps: list[int] = []
    real = SchedulePlan.worked_out_afresh

    def counted(plan: SchedulePlan) -> Any:
        steps.append(plan.steps)
        return real(plan)

    monkeypatch.setattr(SchedulePlan, "worked_out_afresh", counted)
    return steps


def made(seed: int = 0, sampler: str = "euler", **settings: Any) -> FlowMatchSchedule:
    config = settings.pop("config", CONFIG)
    strength = settings.pop("strength", None)
    return FlowMatchSchedule.create(
        config, 6, 1024, CPU, strength, seed=seed, sampler=sampler, **settings
    )


def parts(made: FlowMatchSchedule) -> tuple[Any, ...]:
    stepper = made.stepper
    sampling = cast(FlowSampling, stepper.sampling)
    return (
        list(stepper.sigmas),
        list(stepper.call_sigmas),
        to_floats(made.levels),
        to_floats(made.model_timesteps),
        to_floats(sampling.sigmas),
        sampling.sigma(0.5),
    )


@pytest.mark.parametrize("settings", SETTINGS)
def test_a_kept_plan_reads_back_what_working_it_out_gives(
    worked_out: list[int], settings: dict[str, Any]
) -> None:
    first = made(**dict(settings))
    again = made(seed=9, sampler="dpmpp_2m", **dict(settings))  # not keyed by seed or sampler
    assert len(worked_out) == 1
    flow_schedule.PLANS.clear()
    fresh = made(seed=9, sampler="dpmpp_2m", **dict(settings))
    assert len(worked_out) == 2
    assert parts(again) == parts(fresh)
    assert parts(first)[0] == parts(fresh)[0]  # the sigmas walked are the sampler's business


def test_other_settings_are_worked_out_apart(worked_out: list[int]) -> None:
    made()
    made(strength=0.6)
    made(shift=ModelShift(shift=2.0))
    made(config={**CONFIG, "shift": 6.0})
    assert len(worked_out) == 4
    assert parts(made(config={**CONFIG, "shift": 6.0}))[0] != parts(made())[0]
    assert len(worked_out) == 4


def test_changing_one_renders_schedule_in_place_cannot_reach_the_next(
    worked_out: list[int],
) -> None:
    before = parts(made())
    changed = made()
    changed.stepper.sigmas[0] = 123.0
    sampling = cast(FlowSampling, changed.stepper.sampling)
    sampling.sigmas.mul_(0)
    sampling.shift = 99.0
    changed.levels.zero_()
    after = made()
    assert len(worked_out) == 1  # read back, not worked out again
    assert parts(after) == before


def test_a_callers_own_spacing_is_run_each_time(worked_out: list[int]) -> None:
    given = [1.0, 0.6, 0.3]

    def spacing(_steps: int) -> list[float]:
        return list(given)

    made(spacing=spacing)
    made(spacing=spacing)
    assert len(worked_out) == 2
    assert len(flow_schedule.PLANS) == 0
