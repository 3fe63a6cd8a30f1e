"""Over a real uvicorn, a Wan decode held mid-way (`wan_hold`: after its second chunk) streams
its first frames as chunked fragmented MP4 that PyAV plays, the take not written yet; the server
is then killed (`kill -9`) there, mid-decode, and at its next start it re-runs the render and
writes the same take, byte for byte, as an uninterrupted render of the same frames. The hold
makes each step see the decode in progress whatever the machine's load."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import httpx
from test_wan_server import wan_graph
from test_wan_stream import playable, read_until
from wan_hold import hold_env
from websockets.sync.client import connect

from inline_core.families.wan.kit import WanKit
from inline_core.models.source import IDENTITY_TTL_S
from tests.server.server_support import (
    LiveServer,
    post_run,
    run_state,
    running_server,
    wait_finished,
)

MODEL = "wan2.1_t2v_tiny_fp32.safetensors"


def take_bytes(live: LiveServer, state: dict[str, Any]) -> bytes:
    [take] = state["takes"]
    return httpx.get(live.base + take["uri"], timeout=30).content


def first_chunk(live: LiveServer, run_id: str) -> dict[str, Any]:
    with connect(f"{live.ws_base}/v1/runs/{run_id}/events", open_timeout=30) as ws:
        while (event := json.loads(ws.recv(timeout=120)))["type"] != "chunk":
            assert event["type"] not in ("run_done", "error", "cancelled"), event
    return event


def test_a_held_decode_streams_and_a_crash_there_re_runs_to_the_same_take_bytes(
    wan_kit: WanKit, tmp_path: Path
) -> None:
    shutil.copytree(wan_kit.root, tmp_path / "models")
    hold = tmp_path / "hold"
    hold.touch()
    graph = wan_graph(frames=13, format="png", model=MODEL)
    with running_server(tmp_path, env=hold_env(hold)) as live:
        response = post_run(live, graph, "w")
        assert response.status_code == 201, response.text
        run_id = str(response.json()["runId"])
        chunk = first_chunk(live, run_id)
        assert (chunk["firstFrame"], chunk["frames"], chunk["totalFrames"]) == (0, 1, 13)
        with httpx.stream("GET", f"{live.base}/v1/runs/{run_id}/media/w", timeout=120) as media:
            assert media.headers["transfer-encoding"] == "chunked"
            assert media.headers["content-type"] == "video/mp4"
            assert len(playable(read_until(media.iter_bytes(), 4))) == 4  # frames 0-3 play
            held = run_state(live, run_id)
            assert held["status"] == "running" and held["takes"] == []  # mid-decode
            live.kill9()

        hold.unlink()
        live.start()
        state = wait_finished(live, run_id, timeout=120)
        assert state["status"] == "done", live.log()
        # The uninterrupted render of the same graph: the model file touched (its identity is in
        # the node cache's key, so the recovered take is not reissued; once the identity's memo
        # has lapsed) and its decode held again until its first chunk is seen: rendered anew.
        model = tmp_path / "models" / "diffusion_models" / MODEL
        stamp = model.stat().st_mtime_ns + 1_000_000_000
        os.utime(model, ns=(stamp, stamp))
        time.sleep(IDENTITY_TTL_S + 0.1)
        hold.touch()
        reference = post_run(live, graph, "w")
        assert reference.status_code == 201, reference.text
        reference_id = str(reference.json()["runId"])
        first_chunk(live, reference_id)
        hold.unlink()
        done = wait_finished(live, reference_id, timeout=120)
        assert done["status"] == "done", live.log()
        assert take_bytes(live, state) == take_bytes(live, done)
