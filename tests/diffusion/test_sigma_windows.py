"""A partial schedule, as ComfyUI cuts one, in literal numbers: `denoise` (KSampler's
`set_steps`: a schedule of `int(steps / denoise)` steps of which the last `steps` run) and
KSamplerAdvanced's `start_at_step` / `end_at_step` (`sigmas[:end + 1]`, its last set to 0 unless
the leftover noise is returned, then `sigmas[start:]`)."""

from __future__ import annotations

import pytest

from inline_core.diffusion.flow.steps import denoise_window
from inline_core.diffusion.sigma import schedules
from inline_core.diffusion.sigma.sampling import FlowSampling
from inline_core.diffusion.sigma.window import StepWindow


@pytest.mark.parametrize(
    ("steps", "denoise", "window"),
    [
        (20, 1.0, (20, 0)),
        (20, 0.99995, (20, 0)),  # above ComfyUI's 0.9999: the whole schedule
        (20, 0.5, (40, 20)),
        (4, 0.6, (6, 2)),  # int(6.67)
        (3, 0.3, (10, 7)),
        (7, 0.75, (9, 2)),  # int(9.33)
    ],
)
def test_denoise_runs_the_last_steps_of_a_longer_schedule(
    steps: int, denoise: float, window: tuple[int, int]
) -> None:
    assert denoise_window(steps, denoise) == window
    total, first = window
    sigmas = schedules.schedule_sigmas("simple", FlowSampling(1.0), total)
    assert sigmas[first:] == sigmas[-(steps + 1) :]  # ComfyUI's `sigmas[-(steps + 1):]`


SIGMAS = [1.0, 0.8, 0.6, 0.4, 0.2, 0.0]


@pytest.mark.parametrize(
    ("window", "expected"),
    [
        (StepWindow(), SIGMAS),
        (StepWindow(start=2), [0.6, 0.4, 0.2, 0.0]),
        (StepWindow(end=3), [1.0, 0.8, 0.6, 0.0]),  # the last forced to 0
        (StepWindow(end=3, leftover_noise=True), [1.0, 0.8, 0.6, 0.4]),
        (StepWindow(start=1, end=3, leftover_noise=True), [0.8, 0.6, 0.4]),
        (StepWindow(start=3, end=10000), [0.4, 0.2, 0.0]),
        (StepWindow(end=5), SIGMAS),  # at the schedule's end: nothing cut
    ],
)
def test_a_window_cuts_as_ksampler_advanced(window: StepWindow, expected: list[float]) -> None:
    assert window.cut(SIGMAS) == expected


@pytest.mark.parametrize("window", [StepWindow(start=5), StepWindow(start=3, end=3)])
def test_a_window_holding_no_step_is_refused(window: StepWindow) -> None:
    with pytest.raises(ValueError, match="no step to run"):
        window.cut(SIGMAS)
