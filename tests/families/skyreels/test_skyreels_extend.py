"""Extending a video through the node runner and the step loop: the take starts with the given
frames as they were (at the render's size nothing is resampled), the chunks' events say which of
the video's frames each adds (after the given ones), and the decoded frames stream in order from
the first given frame to the last rendered one. Bad requests are refused naming the param."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from skyreels_harness import render, skyreels_rig, source_video, take_frames

from inline_core.errors import InvalidRequest
from inline_core.families.skyreels.kit import SkyReelsKit
from inline_core.runtime.progress import ChunkDecoded, ChunkStarted, RunEvent
from inline_core.sampling.loop import StepLoopSampler

GIVEN = 13
EXTEND: dict[str, Any] = {"frames": 17, "base_frames": 9, "overlap": 5, "guidance": 1.0}
# The first chunk renders latent frames 0-2 (9 frames, the first two latent frames the overlap's),
# each of the two later ones adds one latent frame (4 frames): 13 + 17 frames out.
CHUNK_FIRST_FRAMES = [GIVEN, GIVEN + 9, GIVEN + 13]


def test_the_extended_video_leads_and_the_chunks_follow_it(
    skyreels_kit: SkyReelsKit, skyreels_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    rig = skyreels_rig(skyreels_kit.root, skyreels_sampler)
    given = source_video(GIVEN, 48, 32)  # the render's size
    events: list[RunEvent] = []
    ours = take_frames(render(rig, tmp_path, video=given, on_event=events.append, **EXTEND))
    assert ours.shape == (GIVEN + 17, 32, 48, 3)
    assert np.array_equal(ours[:GIVEN], given.frames.astype(np.int16))
    started = [e.media for e in events if isinstance(e, ChunkStarted)]
    assert [m["firstFrame"] for m in started] == CHUNK_FIRST_FRAMES
    decoded = [e for e in events if isinstance(e, ChunkDecoded)]
    assert (decoded[0].first, decoded[0].count) == (0, GIVEN)
    covered = 0
    for event in decoded:
        assert event.first == covered and event.total == GIVEN + 17
        covered += event.count
    assert covered == GIVEN + 17


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"frames": 9}, "needs param 'overlap'"),
        ({"frames": 9, "base_frames": 9, "overlap": 17}, "fewer than param 'overlap'"),
        ({"frames": 5, "base_frames": 9, "overlap": 5}, "adds no frame past the overlap"),
    ],
)
def test_a_bad_extension_is_refused(
    skyreels_kit: SkyReelsKit,
    skyreels_sampler: StepLoopSampler,
    tmp_path: Path,
    params: dict[str, Any],
    says: str,
) -> None:
    rig = skyreels_rig(skyreels_kit.root, skyreels_sampler)
    with pytest.raises(InvalidRequest, match=says):
        render(rig, tmp_path, video=source_video(GIVEN, 48, 32), **params)
