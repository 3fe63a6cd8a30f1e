"""`GET /v1/runs/{id}/media/{node}` while an LTX-2 video decodes: a fragmented H.264 MP4 whose
AAC soundtrack plays from the first chunk, before the run has ended (the decode is held after
its chunk by the test, whatever the machine's load); then the take, the same frames and sound."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any, cast

import av
import numpy as np
from av.error import FFmpegError
from fastapi.testclient import TestClient
from test_ltx2_server import ltx2_graph

from inline_core.runtime.video import Audio
from inline_core.runtime.video_stream import Mp4Fragments
from inline_core.server.bootstrap import Services
from tests.families.import_harness import finished
from tests.families.wan.held_videos import held_videos

FRAMES, FPS = 17, 24
FIRST_CHUNK = 3  # frames of the first chunk (two latent frames of the kit's 2x-in-time VAE)


def played(data: bytes) -> tuple[int, np.ndarray[Any, Any]]:
    """The frames and the sound PyAV decodes from the bytes so far."""
    frames = 0
    sound: list[np.ndarray[Any, Any]] = []
    try:
        with av.open(io.BytesIO(data), "r") as container:
            for frame in container.decode(video=0, audio=0):
                if isinstance(frame, av.AudioFrame):
                    sound.append(frame.to_ndarray())
                else:
                    frames += 1
    except FFmpegError:  # the bytes end mid-packet
        pass
    return frames, np.concatenate(sound, axis=1) if sound else np.zeros((2, 0), np.float32)


def read_until(chunks: Iterator[bytes], frames: int) -> bytes:
    data = b""
    for chunk in chunks:
        data += chunk
        if played(data)[0] >= frames:
            return data
    raise AssertionError("the stream ended early")


def test_the_stream_plays_with_its_sound_before_the_run_ends(client: TestClient) -> None:
    board, release, opened = held_videos(hold_after=1)
    try:
        services = cast(Services, client.app.state.services)  # pyright: ignore
        services.manager.videos = board
        graph = ltx2_graph(frames=FRAMES, fps=FPS, format="mp4")
        response = client.post("/v1/runs", json={"graph": graph, "target": "l"})
        assert response.status_code == 201, response.text
        run_id = str(response.json()["runId"])
        with client.stream("GET", f"/v1/runs/{run_id}/media/l") as live:
            assert live.status_code == 200 and live.headers["content-type"] == "video/mp4"
            chunks = live.iter_bytes()
            # The decode is held after its first chunk: its frames play (but the last, whose
            # fragment is to come), with the sound.
            early = read_until(chunks, FIRST_CHUNK - 1)
            assert opened[0].held.is_set()
            state = client.get(f"/v1/runs/{run_id}").json()
            assert state["status"] == "running" and state["takes"] == []
            frames, sound = played(early)
            assert sound.shape[0] == 2 and sound.shape[1] > 0  # the sound, with the first chunk
            release.set()
            whole = early + b"".join(chunks)
        state = finished(client, run_id, seconds=180)
    finally:
        release.set()
    assert state["status"] == "done"
    frames, sound = played(whole)
    assert frames == FRAMES
    take_frames, take_sound = played(client.get(state["takes"][0]["uri"]).content)
    assert take_frames == FRAMES
    assert abs(sound.shape[1] - take_sound.shape[1]) <= 2048  # AAC frames of 1024 samples
    assert np.abs(sound).max() > 0.01


def test_fragments_carry_the_sound_up_to_each_chunks_end() -> None:
    """The stream's encoder alone: each chunk's fragment holds its frames' time of sound."""
    rate, fps = 16000, 8
    t = np.arange(rate, dtype=np.float32) / rate  # one second
    tone = np.stack([np.sin(2 * np.pi * 440 * t), np.sin(2 * np.pi * 660 * t)]) * 0.5
    audio = Audio(tone.astype(np.float32), rate)
    frames = np.zeros((fps, 16, 16, 3), np.uint8)
    stream = Mp4Fragments(fps)
    first = stream.add(frames[:4], audio)  # half a second
    count, heard = played(first)
    assert count >= 1 and 0 < heard.shape[1] <= rate // 2 + 1024
    whole = first + stream.add(frames[4:], audio) + stream.finish()
    count, heard = played(whole)
    assert count == fps and abs(heard.shape[1] - rate) <= 2048
