"""Interactions over a real uvicorn: a long SkyReels-V2 render held inside its first chunk
(`skyreels_hold`) takes a new prompt, stored with the run before the answer and given the next
chunk boundary; the `chunk_started` event of that chunk reports it; held inside that second
chunk, the first chunk's frames already play from the run's MP4 stream; the server is killed
(`kill -9`) inside the second chunk, and at its next start the run replays the interaction at the
same boundary: its take equals, byte for byte, a second run given the same interaction at the same
boundary, and lists it. Frames before the boundary equal the run without it; frames after differ.
Bad interactions are refused: a finished run 409, a node without the protocol 422, a guidance
of 1 for a render whose sampler is a CFG++ one 422."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from skyreels_server import (
    CHANGE,
    FIRST_CHUNK_FRAMES,
    RENDER,
    frames,
    graph,
    held_server,
    interact,
    submit,
    take,
)
from websockets.sync.client import connect

from inline_core.families.skyreels.descriptor import NODE_TYPE
from inline_core.families.skyreels.kit import SkyReelsKit
from tests.server.server_support import LiveServer, post_run, prompt_graph, wait_finished


def interact_once_rendering(live: LiveServer, run_id: str) -> dict[str, Any]:
    """The interaction, sent once the run renders its chunks here (until then: 409)."""
    deadline = time.monotonic() + 120
    while True:  # a liveness bound: the run loads its model first
        response = interact(live, run_id, CHANGE)
        if response.status_code != 409 or time.monotonic() > deadline:
            assert response.status_code == 201, response.text
            return dict(response.json())
        time.sleep(0.05)


def chunk_started(live: LiveServer, run_id: str, chunk: int, hold: Path) -> dict[str, Any]:
    """Move the hold to `chunk` and read the run's events until that chunk starts."""
    with connect(f"{live.ws_base}/v1/runs/{run_id}/events", open_timeout=30) as ws:
        hold.write_text(str(chunk))
        while True:
            event = json.loads(ws.recv(timeout=120))
            assert event["type"] not in ("run_done", "error", "cancelled"), event
            if event["type"] == "chunk_started" and event["chunk"] == chunk:
                return dict(event)


def playable(data: bytes) -> list[np.ndarray[Any, Any]]:
    """The frames PyAV plays from a stream's bytes so far (cut mid-fragment: up to there)."""
    import av
    from av.error import FFmpegError

    shown: list[np.ndarray[Any, Any]] = []
    try:
        with av.open(io.BytesIO(data), "r") as container:
            shown.extend(f.to_ndarray(format="rgb24") for f in container.decode(video=0))
    except FFmpegError:  # the bytes end mid-packet
        pass
    return shown


def read_until(chunks: Iterator[bytes], count: int) -> bytes:
    data = b""
    while len(playable(data)) < count:
        data += next(chunks)
    return data


def test_an_interaction_applies_at_one_boundary_and_replays_after_a_crash(
    skyreels_kit: SkyReelsKit, tmp_path: Path
) -> None:
    with held_server(skyreels_kit, tmp_path) as (live, hold):
        run_id = submit(live, graph())
        sent = interact_once_rendering(live, run_id)
        assert sent["chunk"] == 1 and sent["prompt"] == CHANGE["prompt"]
        bad = interact(live, run_id, {"seed": 4})
        assert bad.status_code == 422 and "seed" in bad.json()["error"]["message"]
        started = chunk_started(live, run_id, 1, hold)
        assert started["interactions"] == [sent]
        assert (started["firstFrame"], started["frames"]) == (FIRST_CHUNK_FRAMES, 4)
        with httpx.stream("GET", f"{live.base}/v1/runs/{run_id}/media/s", timeout=120) as media:
            assert media.headers["content-type"] == "video/mp4"
            shown = read_until(media.iter_bytes(), FIRST_CHUNK_FRAMES - 1)
        assert len(playable(shown)) >= FIRST_CHUNK_FRAMES - 1  # before chunk 1's denoise ends
        held = httpx.get(f"{live.base}/v1/runs/{run_id}", timeout=30).json()
        assert held["status"] == "running" and held["takes"] == []
        live.kill9()  # inside chunk 1, after the interaction took effect

        hold.unlink()
        live.start()
        state = wait_finished(live, run_id, timeout=180)
        assert state["status"] == "done", live.log()
        replayed, found = take(live, state)
        timeline = found["params"]["interactions"]
        assert timeline == [{"chunk": 1, "prompt": CHANGE["prompt"]}]
        late = interact(live, run_id, CHANGE)
        assert late.status_code == 409 and "finished" in late.json()["error"]["message"]

        # The same interaction at the same boundary, uninterrupted: the same take bytes.
        hold.write_text("0")
        again = submit(live, graph())
        assert interact_once_rendering(live, again)["chunk"] == 1
        hold.unlink()
        done = wait_finished(live, again, timeout=180)
        assert done["status"] == "done", live.log()
        assert take(live, done)[0] == replayed

        # No interaction: the first chunk's frames are the same, the later ones are not.
        plain = wait_finished(live, submit(live, graph()), timeout=180)
        ours, theirs = frames(replayed), frames(take(live, plain)[0])
        assert np.array_equal(ours[:FIRST_CHUNK_FRAMES], theirs[:FIRST_CHUNK_FRAMES])
        assert int(np.abs(ours[FIRST_CHUNK_FRAMES:] - theirs[FIRST_CHUNK_FRAMES:]).max()) > 0

        # A run of a node without the protocol.
        slow = post_run(
            live,
            {
                "schemaVersion": 1,
                "nodes": [
                    {"id": "t", "type": "test/slow", "params": {"steps": 100000, "delay": 0.01}}
                ],
            },
            "t",
        )
        slow_id = str(slow.json()["runId"])
        refused = interact(live, slow_id, CHANGE)
        assert refused.status_code == 422, refused.text
        assert NODE_TYPE in refused.json()["error"]["message"]
        httpx.delete(f"{live.base}/v1/runs/{slow_id}", timeout=30)

        # A CFG++ render keeps every step guided: a guidance of 1 is refused naming its sampler.
        hold.write_text("0")
        cfg_pp = {**RENDER, "guidance": 3.0, "sampler": "euler_cfg_pp"}
        guided = submit(live, prompt_graph(NODE_TYPE, "s", cfg_pp, "a lighthouse in a storm"))
        unguided = interact(live, guided, {"guidance": 1.0})
        assert unguided.status_code == 422, unguided.text
        assert "'euler_cfg_pp'" in unguided.json()["error"]["message"]
        httpx.delete(f"{live.base}/v1/runs/{guided}", timeout=30)
        hold.unlink()
