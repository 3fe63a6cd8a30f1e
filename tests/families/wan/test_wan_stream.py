"""`GET /v1/runs/{id}/media/{node}` while a Wan video decodes (through the ASGI app; over a real
uvicorn in test_wan_crash.py): a fragmented H.264 MP4 that PyAV plays before the decode (and
the run) has ended, from the start for a
client that joins late, ending once the take is written; then the take's bytes. A cancel during
the decode ends the run without a take and cuts the stream. The decode is held mid-way by the
test (`held_videos`), so each check sees it in progress whatever the machine's load."""

from __future__ import annotations

import io
import threading
from collections.abc import Callable, Iterator
from typing import Any, cast

import av
import numpy as np
import pytest
from av.error import FFmpegError
from fastapi.testclient import TestClient
from held_videos import HeldVideo, held_videos
from test_wan_server import finished_state, wan_graph

from inline_core.server.bootstrap import Services

FRAMES = 13  # chunks of 1, 4, 4 and 4 frames


Start = Callable[..., tuple[str, threading.Event, list[HeldVideo]]]


@pytest.fixture
def start(client: TestClient) -> Iterator[Start]:
    """Starts a Wan run whose decode holds after `hold_after` chunks (a board swapped in first);
    every hold is released when the test ends, passed or not."""
    releases: list[threading.Event] = []

    def started(hold_after: int, **params: Any) -> tuple[str, threading.Event, list[HeldVideo]]:
        board, release, opened = held_videos(hold_after)
        releases.append(release)
        services = cast(Services, client.app.state.services)  # pyright: ignore
        services.manager.videos = board
        response = client.post("/v1/runs", json={"graph": wan_graph(**params), "target": "w"})
        assert response.status_code == 201, response.text
        return str(response.json()["runId"]), release, opened

    yield started
    for release in releases:
        release.set()


def playable(data: bytes) -> list[np.ndarray[Any, Any]]:
    """The frames PyAV decodes from the bytes so far (a stream cut mid-fragment plays up to
    there)."""
    frames: list[np.ndarray[Any, Any]] = []
    try:
        with av.open(io.BytesIO(data), "r") as container:
            for frame in container.decode(video=0):
                frames.append(frame.to_ndarray(format="rgb24"))
    except FFmpegError:  # the bytes end mid-packet
        pass
    return frames


def read_until(chunks: Iterator[bytes], frames: int) -> bytes:
    """Bytes from the stream until PyAV plays `frames` frames of them."""
    data = b""
    while len(playable(data)) < frames:
        data += next(chunks)
    return data


def test_the_stream_plays_while_the_decode_is_held_and_ends_with_the_take(
    client: TestClient, start: Start
) -> None:
    run_id, release, opened = start(hold_after=2, frames=FRAMES, format="mp4")
    url = f"/v1/runs/{run_id}/media/w"
    with client.stream("GET", url) as first:
        assert first.status_code == 200 and first.headers["content-type"] == "video/mp4"
        assert "content-length" not in first.headers  # chunked: its length is not known yet
        chunks = first.iter_bytes()
        early = read_until(chunks, 4)  # 1 + 4 frames decoded; the fifth's fragment is to come
        assert opened[0].held.is_set() and len(playable(early)) == 4
        state = client.get(f"/v1/runs/{run_id}").json()
        assert state["status"] == "running" and state["takes"] == []
        with client.stream("GET", url) as late:  # joins late: the stream from its start
            joined = playable(read_until(late.iter_bytes(), 4))[:4]
            assert all(np.array_equal(a, b) for a, b in zip(joined, playable(early), strict=True))
            release.set()
            rest = early + b"".join(chunks)
        whole = playable(rest)
    assert len(whole) == FRAMES
    state = finished_state(client, run_id)
    assert state["status"] == "done"
    [take] = state["takes"]
    after = client.get(url)  # the run is over: the take's bytes
    assert after.status_code == 200 and after.headers["etag"] == f'"{take["hash"]}"'
    assert after.content == client.get(take["uri"]).content
    assert len(playable(after.content)) == FRAMES


def test_a_cancel_during_the_decode_cuts_the_stream_and_leaves_no_take(
    client: TestClient, start: Start
) -> None:
    run_id, release, opened = start(hold_after=2, frames=FRAMES, format="png")
    url = f"/v1/runs/{run_id}/media/w"
    with client.stream("GET", url) as response:
        chunks = response.iter_bytes()
        read_until(chunks, 4)
        assert opened[0].held.is_set()
        assert client.delete(f"/v1/runs/{run_id}").status_code == 200
        release.set()  # the decode goes on to its next chunk, where it sees the cancel
        rest = b"".join(chunks)
    state = finished_state(client, run_id)
    assert state["status"] == "cancelled" and state["takes"] == []
    assert opened[0].ended and not opened[0].ok
    assert len(playable(rest)) < FRAMES
    gone = client.get(url)
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "not_found"


def test_unknown_runs_and_nodes_are_404(client: TestClient, start: Start) -> None:
    assert client.get("/v1/runs/nope/media/w").status_code == 404
    run_id, release, _ = start(hold_after=99, frames=5, format="png")
    release.set()
    missing = client.get(f"/v1/runs/{run_id}/media/nope")
    assert missing.status_code == 404 and "no node 'nope'" in missing.json()["error"]["message"]
    assert finished_state(client, run_id)["status"] == "done"
    prompt = client.get(f"/v1/runs/{run_id}/media/p")  # ran, but makes no take
    assert prompt.status_code == 404 and "without a take" in prompt.json()["error"]["message"]
