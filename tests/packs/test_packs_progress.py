"""Progress from a pack node streams like any node's, and cancel reaches it mid-work: a node that
checks for cancel stops there and keeps its worker; one that never checks is ended with it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import connect

from tests.packs.pack_support import (
    chain_graph,
    finished,
    pack_server,
    packs_listing,
    run_to_end,
    start_run,
)
from tests.server.server_support import LiveServer


def progress_until(live: LiveServer, run_id: str, count: int) -> list[dict[str, Any]]:
    """The first `count` progress events of the run's node n1, read off its websocket."""
    seen: list[dict[str, Any]] = []
    with connect(f"{live.ws_base}/v1/runs/{run_id}/events") as ws:
        while len(seen) < count:
            event = json.loads(ws.recv(timeout=60))
            assert event["type"] not in ("run_done", "error", "cancelled"), event
            if event["type"] == "progress" and event["nodeId"] == "n1" and event["step"]:
                seen.append(event)
    return seen


def test_progress_streams_and_cancel_stops_a_pack_node_mid_work(
    packs_home: Path, tmp_path: Path
) -> None:
    with pack_server(tmp_path, packs_home) as live:
        graph = chain_graph(None, ("faults/slow", {"steps": 100_000, "delay": 0.01}))
        run_id = start_run(live, graph, "n1")
        events = progress_until(live, run_id, 3)
        steps = [e["step"] for e in events]
        assert steps == sorted(steps) and all(e["stepCount"] == 100_000 for e in events)
        assert all(e["phase"] == "run" and e["fraction"] < 1 for e in events)
        starts = packs_listing(live)["faults"]["workerStarts"]
        assert httpx.delete(f"{live.base}/v1/runs/{run_id}", timeout=30).status_code == 200
        state = finished(live, run_id)
        assert state["status"] == "cancelled"
        assert state["nodes"]["n1"]["step"] < 100_000  # it stopped mid-work
        # The node stopped at its own check: the same worker serves the next call.
        quick = run_to_end(live, chain_graph(None, ("faults/slow", {"steps": 2})), "n1")
        assert quick["status"] == "done"
        listing = packs_listing(live)["faults"]
        assert listing["workerStarts"] == starts and listing["status"] == "running"


def test_cancel_ends_a_pack_node_that_never_checks_for_it(
    packs_home: Path, tmp_path: Path
) -> None:
    with pack_server(tmp_path, packs_home) as live:
        run_id = start_run(live, chain_graph(None, ("faults/stubborn", {})), "n1")
        with connect(f"{live.ws_base}/v1/runs/{run_id}/events") as ws:
            while True:  # its one progress report says it is at work
                event = json.loads(ws.recv(timeout=60))
                if event["type"] == "progress" and event["nodeId"] == "n1":
                    if event["fraction"] >= 0.5:
                        break
        assert httpx.delete(f"{live.base}/v1/runs/{run_id}", timeout=30).status_code == 200
        assert finished(live, run_id)["status"] == "cancelled"
        assert packs_listing(live)["faults"]["status"] == "idle"  # its worker was ended
        assert run_to_end(live, chain_graph(None, ("faults/slow", {"steps": 1})), "n1")[
            "status"
        ] == "done"
        assert packs_listing(live)["faults"]["workerStarts"] == 2
