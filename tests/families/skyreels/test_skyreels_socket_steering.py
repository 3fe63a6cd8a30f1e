"""Steering a running long SkyReels-V2 render over its events socket, on a real uvicorn: the
render is held inside a chunk (`skyreels_hold`) while the client sends messages on the same
socket it reads the run's events from. Bad messages are each answered with an
`interaction_refused` (status and error envelope) and the socket stays open; a new prompt sent
inside chunk 1 is queued for chunk 2, reported by chunk 2's `chunk_started` and listed in the take;
on the last chunk a steer is refused (409: no boundary left); after the run's end the socket
closes normally and takes nothing. The steered take's frames equal the unsteered run's up to
chunk 2 and differ from there on: the steer changed the chunks after its boundary, and only
them.

A client flooding its own run socket with interactions still gets that socket's events. The
render is held inside chunk 0. Sixteen interactions over HTTP fill the boundary before chunk 1
(the most one boundary takes: the seventeenth is a 429 with Retry-After). Then a thread sends
interaction messages back to back on the socket, without reading, until the socket closes, while
the test reads the socket: the flood is answered with 429s (`busy`: the boundary is full, or too
many of the socket's messages wait to be stored). The hold is lifted with the flood still going:
every chunk's `chunk_started`, the steps' `progress` and the run's `run_done` come on the flooded
socket, between the answers. The take's timeline holds each queued interaction at its chunk,
never more than a boundary takes.

The module's tests share one server (its start is most of their time); each submits its own run."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Generator
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
    held_server,
    interact,
    next_event,
    submit,
    take,
    until_chunk,
)
from websockets.exceptions import ConnectionClosed, ConnectionClosedOK
from websockets.sync.client import ClientConnection

from inline_core.families.skyreels.kit import SkyReelsKit
from inline_core.runtime.interactions import MAX_PER_BOUNDARY
from inline_core.server.socket_steering import MAX_WAITING
from tests.server.server_support import LiveServer, wait_finished

LAST_CHUNK = len(CHUNK_FIRST_FRAMES) - 1
ANSWERS = ("interaction_queued", "interaction_refused")
FLOOD = json.dumps({"type": "interaction", "guidance": 2.5})
# A guard, not a measure: a socket whose events wait for its flood to stop never gets them.
EVENTS_WITHIN_S = 200
FLOOD_SEED = 4  # not the steering test's: its takes would stand in for this render


@pytest.fixture(scope="module")
def held(
    skyreels_kit: SkyReelsKit, tmp_path_factory: pytest.TempPathFactory
) -> Generator[tuple[LiveServer, Path]]:
    """One server for the module's tests, its renders held inside the chunk the hold file names."""
    with held_server(skyreels_kit, tmp_path_factory.mktemp("socket_steering")) as served:
        yield served


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
    held: tuple[LiveServer, Path],
) -> None:
    live, hold = held
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


class Flood(threading.Thread):
    """Sends interaction messages on the socket back to back until it closes."""

    def __init__(self, ws: ClientConnection) -> None:
        super().__init__(daemon=True)
        self.ws = ws
        self.sent = 0

    def run(self) -> None:
        try:
            while True:
                self.ws.send(FLOOD)
                self.sent += 1
        except (ConnectionClosed, OSError):
            return  # the run ended and its socket closed (under a send, perhaps)


def test_a_flooded_socket_still_carries_its_runs_events(held: tuple[LiveServer, Path]) -> None:
    live, hold = held
    with held_run_socket(live, hold, seed=FLOOD_SEED) as (run_id, ws):
        for _ in range(MAX_PER_BOUNDARY):
            assert interact(live, run_id, {"guidance": 2.0}).status_code == 201
        over = interact(live, run_id, {"guidance": 2.0})
        assert over.status_code == 429, over.text
        assert over.headers["Retry-After"] == "1"
        assert "the most one boundary takes" in over.json()["error"]["message"]

        flood = Flood(ws)
        flood.start()
        answers: list[dict[str, Any]] = []
        while not answers:  # the boundary is full and the render held: refused, all
            event = next_event(ws)
            if event["type"] in ANSWERS:
                answers.append(event)
        assert (answers[0]["type"], answers[0]["status"]) == ("interaction_refused", 429)
        assert answers[0]["error"]["code"] == "busy"

        hold.unlink()  # the render goes on, the flood too
        events: list[dict[str, Any]] = []
        give_up = time.monotonic() + EVENTS_WITHIN_S
        while not events or events[-1]["type"] != "run_done":
            assert time.monotonic() < give_up, f"flooded, the socket sent only {events}"
            event = next_event(ws)
            assert event["type"] not in ("error", "cancelled"), event
            (answers if event["type"] in ANSWERS else events).append(event)
        flood.join(timeout=60)
        assert not flood.is_alive()

        kinds = Counter(e["type"] for e in events)
        assert kinds["progress"] > 0, kinds
        started = [e for e in events if e["type"] == "chunk_started"]
        assert [e["chunk"] for e in started] == list(range(1, len(CHUNK_FIRST_FRAMES)))
        refused = [a for a in answers if a["type"] == "interaction_refused"]
        # 409s: the last chunk has no boundary left, or the run ended under the flood.
        assert {a["status"] for a in refused} <= {409, 429}, refused
        bounds = (  # the socket's messages waiting to be stored, or held; the boundary's
            f"{MAX_WAITING} interactions sent on this socket wait to be stored",
            "messages dropped unanswered: over",
            "the most one boundary takes",
        )
        for answer in refused:
            if answer["status"] == 429:
                message = answer["error"]["message"]
                assert any(bound in message for bound in bounds), message

        state = wait_finished(live, run_id, timeout=180)
        timeline = take(live, state)[1]["params"]["interactions"]
        per_chunk = Counter(i["chunk"] for i in timeline)
        assert per_chunk[1] == MAX_PER_BOUNDARY, per_chunk
        assert max(per_chunk.values()) <= MAX_PER_BOUNDARY, per_chunk
        for event in started:
            assert len(event["interactions"]) == per_chunk[event["chunk"]]
        queued = [a for a in answers if a["type"] == "interaction_queued"]
        assert all(per_chunk[a["chunk"]] > 0 for a in queued)
