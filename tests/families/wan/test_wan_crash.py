"""A server killed (`kill -9`) in the middle of a Wan decode re-runs the render at its next start
and writes the same take, byte for byte, as an uninterrupted render of the same graph. The decode
is held after its second chunk (`wan_hold`), so the kill, sent once the first chunk is out,
lands mid-decode whatever the machine's load."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import httpx
from test_wan_server import wan_graph
from wan_hold import hold_env
from websockets.sync.client import connect

from inline_core.families.wan.kit import WanKit
from tests.server.server_support import (
    LiveServer,
    post_run,
    run_state,
    running_server,
    wait_finished,
)


def take_bytes(live: LiveServer, state: dict[str, Any]) -> bytes:
    [take] = state["takes"]
    return httpx.get(live.base + take["uri"], timeout=30).content


def first_chunk(live: LiveServer, run_id: str) -> dict[str, Any]:
    with connect(f"{live.ws_base}/v1/runs/{run_id}/events", open_timeout=30) as ws:
        while (event := json.loads(ws.recv(timeout=120)))["type"] != "chunk":
            assert event["type"] not in ("run_done", "error", "cancelled"), event
    return event


def test_a_crash_mid_decode_re_runs_to_the_same_take_bytes(wan_kit: WanKit, tmp_path: Path) -> None:
    shutil.copytree(wan_kit.root, tmp_path / "models")
    hold = tmp_path / "hold"
    env = hold_env(hold)
    graph = wan_graph(frames=13, format="png")
    with running_server(tmp_path, env=env) as live:
        reference = post_run(live, graph, "w")
        assert reference.status_code == 201, reference.text
        done = wait_finished(live, str(reference.json()["runId"]), timeout=120)
        assert done["status"] == "done", live.log()
        expected = take_bytes(live, done)
        live.kill9()  # its node cache goes with it: the same graph renders again below

        hold.touch()
        live.start()
        response = post_run(live, graph, "w")
        assert response.status_code == 201, response.text
        run_id = str(response.json()["runId"])
        chunk = first_chunk(live, run_id)
        assert (chunk["firstFrame"], chunk["frames"], chunk["totalFrames"]) == (0, 1, 13)
        held = run_state(live, run_id)
        assert held["status"] == "running" and held["takes"] == []  # mid-decode
        live.kill9()

        hold.unlink()
        live.start()
        state = wait_finished(live, run_id, timeout=120)
        assert state["status"] == "done", live.log()
        assert take_bytes(live, state) == expected
