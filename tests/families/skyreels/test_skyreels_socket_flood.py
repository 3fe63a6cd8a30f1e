"""A client flooding its own run socket with interactions still gets that socket's events, on a
real uvicorn with a real websocket client.

The render is held inside chunk 0 (`skyreels_hold`). Sixteen interactions over HTTP fill the
boundary before chunk 1 (the most one boundary takes: the seventeenth is a 429 with Retry-After).
Then a thread sends interaction messages back to back on the socket, without reading, until the
socket closes, while the test reads the socket: the flood is answered with 429s (`busy`: the
boundary is full, or too many of the socket's messages wait to be stored). The hold is lifted
with the flood still going: every chunk's `chunk_started`, the steps' `progress` and the run's
`run_done` come on the flooded socket, between the answers. The take's timeline holds each
queued interaction at its chunk, never more than a boundary takes."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from skyreels_server import (
    CHUNK_FIRST_FRAMES,
    held_run_socket,
    interact,
    next_event,
    take,
)
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection

from inline_core.runtime.interactions import MAX_PER_BOUNDARY
from inline_core.server.socket_steering import MAX_WAITING
from tests.server.server_support import LiveServer, wait_finished

ANSWERS = ("interaction_queued", "interaction_refused")
FLOOD = json.dumps({"type": "interaction", "guidance": 2.5})
# A guard, not a measure: a socket whose events wait for its flood to stop never gets them.
EVENTS_WITHIN_S = 200


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


def test_a_flooded_socket_still_carries_its_runs_events(
    socket_server: tuple[LiveServer, Path],
) -> None:
    live, hold = socket_server  # shared with the other socket test (conftest.py)
    with held_run_socket(live, hold, seed=4) as (run_id, ws):
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
