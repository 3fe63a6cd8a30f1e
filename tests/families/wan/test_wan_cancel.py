"""A Wan render cancelled during its denoise or its decode ends with `Cancelled` and no take, and
leaves nothing behind: the next render is the uninterrupted one's frames exactly. The frames a
render streams (its live video) are the take's frames, in order, chunk by chunk."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from wan_harness import render, take_frames, wan_rig

from inline_core.errors import Cancelled
from inline_core.families.wan.kit import WanKit
from inline_core.runtime.cancel import CancelToken
from inline_core.runtime.progress import ChunkDecoded, Progress, RunEvent
from inline_core.runtime.video_stream import LiveVideo, LiveVideos
from inline_core.sampling.loop import StepLoopSampler

RENDER: dict[str, Any] = {"frames": 13, "steps": 4, "guidance": 1.0, "seed": 5}


def test_a_cancel_during_the_denoise_ends_it_at_the_next_step_without_a_take(
    wan_kit: WanKit, wan_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    rig = wan_rig(wan_kit.root, wan_sampler)
    cancel = CancelToken()
    steps: list[int] = []

    def on_event(event: RunEvent) -> None:
        if isinstance(event, Progress) and event.phase == "sample" and event.step:
            steps.append(event.step)
            cancel.cancel("stop")  # on the loop thread, between two steps

    with pytest.raises(Cancelled):
        render(rig, tmp_path / "takes", cancel=cancel, on_event=on_event, **RENDER)
    assert steps == [1]
    assert not list((tmp_path / "takes").glob("*"))


def test_a_cancel_during_the_decode_stops_it_at_the_next_chunk_and_leaves_nothing_behind(
    wan_kit: WanKit, wan_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    rig = wan_rig(wan_kit.root, wan_sampler)
    uncut = take_frames(render(rig, tmp_path / "uncut", **RENDER))
    videos = LiveVideos()
    cancel = CancelToken()
    chunks: list[int] = []
    live: list[LiveVideo | None] = []
    runs: set[str] = set()

    def on_event(event: RunEvent) -> None:
        if isinstance(event, ChunkDecoded):
            chunks.append(event.first)
            runs.add(event.run_id)
            live.append(videos.get(event.run_id, event.node_id))
            if event.first == 1:  # the second of four chunks
                cancel.cancel("stop")

    with pytest.raises(Cancelled):
        render(rig, tmp_path / "cut", cancel=cancel, on_event=on_event, videos=videos, **RENDER)
    assert chunks == [0, 1]  # the decode went no further
    assert not list((tmp_path / "cut").glob("*"))
    stream = live[0]
    assert stream is not None and stream.ended and not stream.ok
    [run_id] = runs
    assert videos.get(run_id, "w") is None and all(v is stream for v in live)  # off the board
    # The decoder's causal cache was cleared: the next render is the uninterrupted one.
    again = take_frames(render(rig, tmp_path / "again", **RENDER))
    assert again.shape[0] == 13 and np.array_equal(again, uncut)


def test_the_live_video_carries_the_takes_frames_chunk_by_chunk(
    wan_kit: WanKit, wan_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    videos = LiveVideos()
    seen: list[LiveVideo] = []
    runs: set[str] = set()

    def on_event(event: RunEvent) -> None:
        if isinstance(event, ChunkDecoded) and not seen:
            stream = videos.get(event.run_id, event.node_id)
            assert stream is not None
            seen.append(stream)
            runs.add(event.run_id)

    rig = wan_rig(wan_kit.root, wan_sampler)
    frames = take_frames(render(rig, tmp_path, on_event=on_event, videos=videos, **RENDER))
    [stream] = seen
    chunks, ended = stream.chunks_after(0, timeout=0)
    assert ended and stream.ok and stream.fps == 16
    assert [len(c) for c in chunks] == [1, 4, 4, 4]
    assert np.array_equal(np.concatenate(chunks).astype(np.int16), frames)
    [run_id] = runs
    assert videos.get(run_id, "w") is None  # off the board once its take is written
