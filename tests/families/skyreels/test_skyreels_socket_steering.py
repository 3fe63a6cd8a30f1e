"""Steering a running long SkyReels-V2 render over its events socket, on a real uvicorn: the
render is held inside a chunk (`skyreels_hold`) while the client sends messages on the same
socket it reads the run's events from. Bad messages are each answered with an
`interaction_refused` (status and error envelope) and the socket stays open; a new prompt sent
inside chunk 1 is queued for chunk 2, reported by chunk 2's `chunk_started` and listed in the take;
on the last chunk a steer is refused (409: no boundary left); after the run's end the socket
closes normally and takes nothing. The steered take's frames equal the unsteered run's up to
chunk 2 and differ from there on: the steer changed the chunks after its boundary, and only
them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from skyreels_server import (
    CHANGE,
    CHUNK_FIRST_FRAMES,
    frames,
    graph,
    held_run_socket,
    next_event,
    submit,
    take,
    until_chunk,
)
from websockets.exceptions import ConnectionClosed, ConnectionClosedOK
from websockets.sync.client import ClientConnection

from tests.server.server_support import LiveServer, wait_finished

LAST_CHUNK = len(CHUNK_FIRST_FRAMES) - 1


def steer(ws: ClientConnection, message: str | bytes) -> dict[str, Any]:
    """Send a message; its answer, past the events that come before it."""
    ws.send(message)
    while True:
        event = next_event(ws)
        if event["type"] in ("interaction_queued", "interaction_refused"):
            return event
        assert event["type"] not in ("run_done", "error", "cancelled"), event


def refused(ws: ClientConnection, message: str | bytes, status: int, says: str) -> None:
    answer = steer(ws, message)
    assert answer["type"] == "interaction_refused", answer
    assert answer["status"] == status, answer
    assert says in answer["error"]["message"], answer


def test_a_client_steers_the_chunks_after_a_boundary_over_the_socket(
    socket_server: tuple[LiveServer, Path],
) -> None:
    live, hold = socket_server  # shared with the other socket test (conftest.py)
    with held_run_socket(live, hold) as (run_id, ws):
        refused(ws, b"\x00", 422, "JSON text")
        refused(ws, "{not json", 422, "not valid JSON")
        refused(ws, "[1]", 422, "must be a JSON object")
        refused(ws, json.dumps(CHANGE), 422, "type 'interaction' (got no 'type')")
        refused(ws, json.dumps({"type": "pause"}), 422, "(got type 'pause')")
        refused(ws, json.dumps({"type": "interaction", "seed": 4}), 422, "seed")
        too_strong = {"type": "interaction", "guidance": 50}
        refused(ws, json.dumps(too_strong), 422, "must be 1..20")
        huge = {"type": "interaction", "prompt": "x" * 300_000}
        refused(ws, json.dumps(huge), 413, "limit")

        hold.write_text("1")
        until_chunk(ws, 1)
        queued = steer(ws, json.dumps({"type": "interaction", **CHANGE}))
        assert queued["type"] == "interaction_queued", queued
        assert (queued["runId"], queued["chunk"], queued["prompt"]) == (
            run_id,
            2,
            CHANGE["prompt"],
        )
        sent = {k: queued[k] for k in ("id", "chunk", "prompt")}

        hold.write_text(str(LAST_CHUNK))
        started = until_chunk(ws, 2)
        assert started["interactions"] == [sent]
        assert started["firstFrame"] == CHUNK_FIRST_FRAMES[2]
        assert until_chunk(ws, LAST_CHUNK)["interactions"] == []
        refused(ws, json.dumps({"type": "interaction", **CHANGE}), 409, "last chunk")

        hold.unlink()
        while next_event(ws)["type"] != "run_done":
            pass
        try:  # the socket closes after the terminal event: a steer then is not taken
            ws.send(json.dumps({"type": "interaction", **CHANGE}))
        except ConnectionClosed:
            pass
        with pytest.raises(ConnectionClosedOK):
            ws.recv(timeout=30)
        assert ws.close_code == 1000
        state = wait_finished(live, run_id, timeout=180)
        steered, found = take(live, state)
        assert found["params"]["interactions"] == [{"chunk": 2, "prompt": CHANGE["prompt"]}]

        plain_state = wait_finished(live, submit(live, graph()), timeout=180)
        ours, theirs = frames(steered), frames(take(live, plain_state)[0])
        boundary = CHUNK_FIRST_FRAMES[2]
        assert np.array_equal(ours[:boundary], theirs[:boundary])
        assert int(np.abs(ours[boundary:] - theirs[boundary:]).max()) > 0
