"""LTX-2's takes with sound: the video take an H.264 MP4 carrying its soundtrack as AAC (sample
rate and channels in its facts), the audio take a FLAC or WAV of the same samples, both with the
graph and params inside."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import av
import numpy as np
from ltx2_harness import ltx2_rig, render

from inline_core.families.ltx2.kit import LTX2Kit
from inline_core.media import MediaKind
from inline_core.runtime.audio import decode_wav
from inline_core.runtime.video import Video
from inline_core.sampling.loop import StepLoopSampler

FRAMES, FPS = 9, 24


def test_mp4_take_carries_its_soundtrack_and_the_audio_take_is_flac(
    ltx2_kit: LTX2Kit, ltx2_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    rig = ltx2_rig(ltx2_kit.root, ltx2_sampler)
    result = render(rig, tmp_path, format="mp4", audio_format="flac", frames=FRAMES, fps=FPS)
    video, sound = result.takes
    assert (video.kind, sound.kind) == (MediaKind.VIDEO, MediaKind.AUDIO)
    assert video.facts.content_type == "video/mp4" and sound.facts.content_type == "audio/flac"
    assert (video.facts.frames, video.facts.fps) == (FRAMES, FPS)
    length = FRAMES / FPS
    for facts in (video.facts, sound.facts):
        assert facts.sample_rate == 16000 and facts.channels == 2
        assert facts.audio_s is not None and abs(facts.audio_s - length) < 0.1
    container: Any = av.open(io.BytesIO(Path(video.path).read_bytes()))
    with container:
        assert container.streams.audio[0].codec_context.name == "aac"
        assert json.loads(container.metadata["inline:params"])["frames"] == FRAMES
        heard = np.concatenate(
            [f.to_ndarray() for f in container.decode(container.streams.audio[0])], axis=1
        )
    assert np.abs(heard).max() > 0.01  # the soundtrack plays, not silence
    flac: Any = av.open(io.BytesIO(Path(sound.path).read_bytes()))
    with flac:
        assert json.loads(flac.metadata["inline:params"])["seed"] == 7
    assert set(result.outputs) == {"video", "audio"}


def test_png_take_is_silent_and_its_sound_a_wav_take(
    ltx2_kit: LTX2Kit, ltx2_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    rig = ltx2_rig(ltx2_kit.root, ltx2_sampler)
    result = render(rig, tmp_path, format="png", audio_format="wav")
    video, sound = result.takes
    assert video.facts.content_type == "image/apng" and video.facts.sample_rate is None
    assert sound.facts.content_type == "audio/wav" and sound.facts.channels == 2
    data = Path(sound.path).read_bytes()
    assert b"inline:params" in data  # the graph and params ride in its INFO comment
    audio = decode_wav(data)
    assert audio.sample_rate == 16000 and audio.samples.shape[0] == 2
    assert sound.id != video.id


def test_a_render_run_again_writes_the_same_bytes(
    ltx2_kit: LTX2Kit, ltx2_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    """What a run re-run after a crash relies on: the same render, the same take files (the MP4
    with its AAC track and the FLAC), byte for byte."""
    rig = ltx2_rig(ltx2_kit.root, ltx2_sampler)
    first = render(rig, tmp_path / "a", format="mp4", audio_format="flac", frames=FRAMES, fps=FPS)
    again = render(rig, tmp_path / "b", format="mp4", audio_format="flac", frames=FRAMES, fps=FPS)
    # The render first, then its encoding: a failure says which of the two differed.
    video, video_again = first.outputs["video"], again.outputs["video"]
    assert isinstance(video, Video) and isinstance(video_again, Video)
    frame_diff = int(np.abs(video.frames.astype(np.int16) - video_again.frames).max())
    assert frame_diff == 0, f"the re-run rendered other frames (up to {frame_diff} levels)"
    assert video.audio is not None and video_again.audio is not None
    assert np.array_equal(video.audio.samples, video_again.audio.samples), "other sound"
    for one, other in zip(first.takes, again.takes, strict=True):
        assert Path(one.path).read_bytes() == Path(other.path).read_bytes(), "encoded otherwise"
        assert one.hash == other.hash
