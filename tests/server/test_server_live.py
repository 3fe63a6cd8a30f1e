"""A real server process on loopback: websocket, restart, graceful stop, and kill -9 recovery."""

from __future__ import annotations

import hashlib
import io
import json
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image
from server_support import (
    LiveServer,
    post_run,
    run_state,
    running_server,
    slow_graph,
    text_graph,
    wait_finished,
    wait_until,
)
from store_support import query
from websockets.exceptions import ConnectionClosedOK
from websockets.sync.client import connect


@pytest.fixture
def server(tmp_path: Path, database_url: str | None) -> Iterator[LiveServer]:
    # Named, so that after a kill -9 its restart takes back its runs at once (an unnamed server
    # sharing PostgreSQL leaves them to expire and be taken over).
    with running_server(tmp_path, {"INLINE_SERVER_ID": "live-1"}, database_url) as live:
        yield live


def test_websocket_then_restart_serves_finished_runs_takes_and_client_run_ids(
    server: LiveServer,
) -> None:
    response = post_run(server, slow_graph(steps=10, delay=0.01, seed=9), "s", clientRunId="keep")
    assert response.status_code == 201
    run_id = response.json()["runId"]
    messages: list[dict[str, Any]] = []
    with connect(f"{server.ws_base}/v1/runs/{run_id}/events") as ws:
        try:
            while True:
                messages.append(json.loads(ws.recv(timeout=30)))
        except ConnectionClosedOK:
            pass
    assert messages[0]["type"] == "snapshot"
    assert messages[-1]["type"] == "run_done"
    [take] = messages[-1]["takes"]
    data = httpx.get(server.base + take["uri"]).content
    assert take["hash"] == "sha256-" + hashlib.sha256(data).hexdigest()
    before = run_state(server, run_id)

    server.stop()
    server.start()

    after = run_state(server, run_id)
    assert after["status"] == "done" and after["takes"] == before["takes"]
    assert httpx.get(server.base + take["uri"]).content == data
    assert httpx.get(f"{server.base}/v1/takes/{take['id']}").json() == take
    repeat = post_run(server, slow_graph(steps=10, delay=0.01, seed=9), "s", clientRunId="keep")
    assert repeat.status_code == 200 and repeat.json()["runId"] == run_id
    other = post_run(server, text_graph(), "t", clientRunId="keep")
    assert other.status_code == 409
    with connect(f"{server.ws_base}/v1/runs/{run_id}/events") as ws:
        replay = [json.loads(ws.recv(timeout=30)), json.loads(ws.recv(timeout=30))]
    assert [m["type"] for m in replay] == ["snapshot", "run_done"]


def test_sigterm_puts_a_running_run_back_and_the_next_start_finishes_it(
    server: LiveServer,
) -> None:
    # Gated: in progress until the gate opens, however slowly this machine runs the rest.
    gate = server.data_dir / "gate"
    graph = slow_graph(node_type="test/gated", gate=str(gate))
    run_id = post_run(server, graph, "s").json()["runId"]
    queued = post_run(server, text_graph(), "t").json()["runId"]
    wait_finished(server, queued)
    wait_until(
        lambda: run_state(server, run_id)["fraction"] > 0 or None, "the gated run to progress"
    )

    server.stop(signal.SIGTERM)
    gate.touch()  # the next start finishes it

    [(status, attempts)] = query(
        server.store_config, "SELECT status, attempts FROM runs WHERE id = ?", (run_id,)
    )
    assert (status, attempts) == ("queued", 0)  # back in the queue, the attempt not counted

    server.start()
    final = wait_finished(server, run_id)
    assert final["status"] == "done" and final["attempts"] == 1


def test_a_websocket_client_that_stops_reading_does_not_stall_the_run(server: LiveServer) -> None:
    steps = 20_000  # ~4 MB of progress events: far more than the socket buffers hold
    run_id = post_run(server, slow_graph(steps=steps, delay=0.0), "s").json()["runId"]
    with connect(f"{server.ws_base}/v1/runs/{run_id}/events", max_queue=1) as ws:
        first = json.loads(ws.recv(timeout=30))
        assert first["type"] == "snapshot"
        # Read nothing more until the run is over: it must finish regardless.
        final = wait_finished(server, run_id)
        assert final["status"] == "done"
        messages: list[dict[str, Any]] = []
        try:
            while True:
                messages.append(json.loads(ws.recv(timeout=30)))
        except ConnectionClosedOK:
            pass
    assert messages[-1]["type"] == "run_done"
    assert len(messages) < steps  # progress was coalesced while the client lagged
    progress = [m for m in messages if m["type"] == "progress" and m["nodeId"] == "s"]
    assert progress[-1]["step"] == steps  # but the node's last state still arrived
    assert [m["nodeId"] for m in messages if m["type"] == "node_done"][-1] == "s"


def expected_colour(seed: int) -> tuple[int, int, int]:
    return seed % 251, (seed // 251) % 251, (seed // 63001) % 251


def test_kill_9_mid_run_loses_nothing_and_duplicates_nothing(server: LiveServer) -> None:
    accepted: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()

    def submitter(index: int) -> None:
        n = 0
        while not stop.is_set() and n < 6:
            n += 1
            try:
                response = post_run(server, slow_graph(steps=15, delay=0.01), "s")
            except httpx.HTTPError:
                return  # the server died under us; an unanswered POST was never accepted
            if response.status_code == 201:
                with lock:
                    accepted.append(response.json()["runId"])

    for _cycle in range(2):
        threads = [threading.Thread(target=submitter, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()

        def busy() -> bool | None:
            counts = httpx.get(server.base + "/v1/health").json()["runs"]
            with lock:
                some = len(accepted) >= 6
            return True if some and counts["running"] > 0 else None

        wait_until(busy, "runs to be running", interval=0.01)
        server.kill9()
        stop.set()
        for t in threads:
            t.join()
        stop.clear()
        server.start()

    assert accepted
    finals = {run_id: wait_finished(server, run_id) for run_id in accepted}
    assert {state["status"] for state in finals.values()} == {"done"}

    # A run whose POST was committed but whose answer the kill cut off is in the store too;
    # let everything the store holds finish before comparing files with records.
    def idle() -> bool | None:
        counts = httpx.get(server.base + "/v1/health").json()["runs"]
        return True if counts == {"queued": 0, "running": 0} else None

    wait_until(idle, "every stored run to finish")
    for state in finals.values():
        assert len(state["takes"]) == 1, state  # one take per run, never two
        take = state["takes"][0]
        data = httpx.get(server.base + take["uri"]).content
        assert take["hash"] == "sha256-" + hashlib.sha256(data).hexdigest()
        # The stored (resolved) seed reproduces the same pixels on a re-run.
        seed = state["graph"]["nodes"][1]["params"]["seed"]
        assert take["params"]["seed"] == seed
        with Image.open(io.BytesIO(data)) as image:
            assert image.getpixel((0, 0)) == expected_colour(seed)
    store = server.store_config
    if store.database_url is None:
        assert query(store, "PRAGMA integrity_check") == [("ok",)]
    stuck = query(store, "SELECT COUNT(*) FROM runs WHERE status IN ('queued', 'running')")
    assert stuck == [(0,)]
    rows = query(store, "SELECT id, run_id, path, hash FROM takes")
    per_run = query(store, "SELECT run_id, COUNT(*) FROM takes GROUP BY run_id")
    assert all(count == 1 for _run, count in per_run)
    for _take_id, _run, path, digest in rows:
        assert digest == "sha256-" + hashlib.sha256(Path(path).read_bytes()).hexdigest()
    # Every take file on disk is a recorded take, and no take was written twice.
    takes_dir = server.data_dir / "takes"
    files = sorted(p.stem for p in takes_dir.iterdir() if not p.name.startswith("."))
    assert files == sorted(row[0] for row in rows)
