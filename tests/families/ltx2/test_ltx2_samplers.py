"""LTX-2 through the sigma library's samplers and schedules: euler on `simple` is LTX2Pipeline's
own (the parity tests); another pair renders its own sigmas for both streams, a two-call sampler
makes its extra model calls, an ancestral one draws its noise from the request's seed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ltx2_harness import ltx2_rig, max_diff, reference, render, take_audio, take_frames

from inline_core.errors import InvalidRequest
from inline_core.families.ltx2.kit import LTX2Kit
from inline_core.families.ltx2.request import new_request
from inline_core.sampling.loop import StepLoopSampler


def test_the_default_pair_names_ltx2_pipelines_own(
    ltx2_kit: LTX2Kit, ltx2_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    rig = ltx2_rig(ltx2_kit.root, ltx2_sampler)
    default = render(rig, tmp_path / "a")
    named = render(rig, tmp_path / "b", sampler="euler", schedule="simple")
    assert max_diff(take_frames(default), take_frames(named)) == 0
    assert np.array_equal(take_audio(default).samples, take_audio(named).samples)


def test_another_sampler_and_schedule_render_their_own_sigmas(
    ltx2_kit: LTX2Kit, ltx2_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    rig = ltx2_rig(ltx2_kit.root, ltx2_sampler)
    euler = take_frames(render(rig, tmp_path / "a", steps=3))
    heun = render(rig, tmp_path / "b", steps=3, sampler="heun", schedule="karras")
    frames, sound = take_frames(heun), take_audio(heun)
    assert frames.shape == euler.shape == (5, 32, 32, 3)
    assert frames.std() > 1.0
    assert max_diff(frames, euler) > 0  # a different path to the end, not euler's frames
    assert float(np.abs(sound.samples).max()) > 0.003  # a sound, not silence
    assert heun.takes[0].params["sampler"] == "heun"
    assert heun.takes[0].params["sigma_schedule"] == "karras"


def test_an_ancestral_sampler_renders_the_same_take_from_the_same_seed(
    ltx2_kit: LTX2Kit, ltx2_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    rig = ltx2_rig(ltx2_kit.root, ltx2_sampler)
    first = render(rig, tmp_path / "a", sampler="euler_ancestral", steps=3)
    again = render(rig, tmp_path / "b", sampler="euler_ancestral", steps=3)
    other = render(rig, tmp_path / "c", sampler="euler_ancestral", steps=3, seed=8)
    assert max_diff(take_frames(first), take_frames(again)) == 0
    assert np.array_equal(take_audio(first).samples, take_audio(again).samples)
    assert max_diff(take_frames(first), take_frames(other)) > 0


@pytest.mark.parametrize(
    ("field", "value"), [("sampler", "euler_fancy"), ("sigma_schedule", "cosine")]
)
def test_an_unknown_sampler_or_schedule_is_refused(field: str, value: str) -> None:
    sizes = {"width": 32, "height": 32, "frames": 9, "steps": 2, "guidance": 1.0, "seed": 0}
    with pytest.raises(InvalidRequest, match=value):
        new_request("m", prompt="p", **sizes, **{field: value})


def test_a_first_pass_on_explicit_sigmas_is_ltx2_pipelines_on_those_sigmas(
    ltx2_kit: LTX2Kit, ltx2_sampler: StepLoopSampler, ltx2_reference: Any, tmp_path: Path
) -> None:
    """`sigmas` (ComfyUI's ManualSigmas, the distilled template's first pass): stepped as given,
    unshifted, as LTX2Pipeline steps `sigmas` on its scheduler without the shift."""
    levels = (1.0, 0.975, 0.725, 0.421875)
    rig = ltx2_rig(ltx2_kit.root, ltx2_sampler)
    text = ", ".join(str(v) for v in (*levels, 0.0))
    ours = render(rig, tmp_path, sigmas=text)
    want, want_sound = reference(ltx2_reference, sigmas=levels, steps=len(levels))
    assert max_diff(take_frames(ours), want) <= 2
    reference_16 = np.round(np.clip(want_sound.samples, -1, 1) * 32767.0) / 32767.0
    assert float(np.abs(take_audio(ours).samples - reference_16).max()) <= 4.0 / 32767.0
    assert ours.takes[0].params["steps"] == len(levels)
    with pytest.raises(InvalidRequest, match="end at 0"):
        render(rig, tmp_path, sigmas="1.0, 0.5")
