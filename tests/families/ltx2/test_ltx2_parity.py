"""Parity: an LTX-2 take rendered through the node runner and the step loop equals what
diffusers' own `LTX2Pipeline` renders from the same tiny weights, seed and params.

Frames are compared on the lossless APNG take; the soundtrack on the WAV take, which holds
16-bit samples: within one 16-bit step of diffusers' float samples (AUDIO_TOLERANCE), and within
a few steps with guidance, where our forward runs the positive and negative prompts as one
batch of two and diffusers' its connectors over both at once (a few ulps apart on CPU kernels).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ltx2_harness import Pixels, ltx2_rig, max_diff, reference, render, take_audio, take_frames

from inline_core.families.ltx2.kit import LTX2Kit
from inline_core.runtime.video import Audio
from inline_core.sampling.loop import StepLoopSampler

CASES = [
    pytest.param({"guidance": 1.0, "audio_guidance": 1.0}, id="nocfg"),
    pytest.param(
        {"guidance": 4.0, "audio_guidance": 7.0, "negative_prompt": "blurry, silent"}, id="cfg"
    ),
]
TOLERANCE = 2  # levels of 255
MAX_DIFFERING = 0.01  # share of channel values allowed to differ at all
ONE_STEP = 1.0 / 32767.0  # one 16-bit sample step
AUDIO_TOLERANCE = 4 * ONE_STEP


def assert_frames_match(ours: Pixels, ref: Pixels) -> None:
    """Our take's frames are diffusers' within the tolerances above."""
    assert ours.shape == (5, 32, 32, 3)
    assert max_diff(ours, ref) <= TOLERANCE
    assert float((ours != ref).mean()) <= MAX_DIFFERING


def assert_sound_matches(sound: Audio, ref_sound: Audio) -> None:
    """Our 16-bit soundtrack is diffusers' float one within a few 16-bit steps."""
    assert sound.sample_rate == ref_sound.sample_rate
    assert sound.samples.shape == ref_sound.samples.shape
    reference_16 = np.round(np.clip(ref_sound.samples, -1, 1) * 32767.0) / 32767.0
    assert float(np.abs(sound.samples - reference_16).max()) <= AUDIO_TOLERANCE


def assert_text_to_video_matches(ours: Pixels, sound: Audio, ref: Pixels, ref_sound: Audio) -> None:
    """A text-to-video take equals diffusers' render: frames of noise and a sound, both within
    the tolerances (shared by LTX-2.0 and 2.5)."""
    assert_frames_match(ours, ref)
    assert ours.std() > 1.0  # frames of noise, not a flat fill
    assert_sound_matches(sound, ref_sound)
    assert float(np.abs(sound.samples).max()) > 100 * ONE_STEP  # a sound, not silence


@pytest.mark.parametrize("params", CASES)
def test_text_to_video_with_sound_matches_ltx2_pipeline(
    ltx2_kit: LTX2Kit,
    ltx2_sampler: StepLoopSampler,
    ltx2_reference: Any,
    tmp_path: Path,
    params: dict[str, Any],
) -> None:
    rig = ltx2_rig(ltx2_kit.root, ltx2_sampler)
    result = render(rig, tmp_path, **params)
    ref, ref_sound = reference(ltx2_reference, **params)
    assert_text_to_video_matches(take_frames(result), take_audio(result), ref, ref_sound)
