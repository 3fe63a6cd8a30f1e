"""SIGTERM on a real server under load: it stops accepting, records the running run so it resumes,
closes watching websockets, exits cleanly, and leaves no process of its own behind."""

from __future__ import annotations

import json
import signal
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from tests.server.server_support import (
    FINISHED,
    LiveServer,
    running_server,
    slow_graph,
    text_graph,
    wait_until,
)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    with running_server(tmp_path) as live:
        yield live


def ours(data_dir: Path) -> list[psutil.Process]:
    """Live processes started with this server's data dir (the server or anything it spawned)."""
    found: list[psutil.Process] = []
    for process in psutil.process_iter():
        try:
            env = process.environ()
            alive = process.status() != psutil.STATUS_ZOMBIE
        except (psutil.Error, OSError):
            continue
        if alive and env.get("INLINE_DATA_DIR") == str(data_dir):
            found.append(process)
    return found


def state(live: LiveServer, run_id: str) -> dict[str, Any]:
    return httpx.get(f"{live.base}/v1/runs/{run_id}", timeout=10).json()


def test_sigterm_stops_cleanly_and_everything_accepted_resumes(server: LiveServer) -> None:
    base = server.base
    long_run = httpx.post(
        base + "/v1/runs", json={"graph": slow_graph(steps=100_000, delay=0.01), "target": "s"}
    ).json()["runId"]
    wait_until(lambda: state(server, long_run)["fraction"] > 0 or None, "the run to progress")
    assert server.proc is not None
    assert [p.pid for p in ours(server.data_dir)] == [server.proc.pid]

    # A client watching the run over a websocket, and clients still submitting.
    closed: list[str] = []

    def watch() -> None:
        with connect(f"{server.ws_base}/v1/runs/{long_run}/events") as ws:
            try:
                while True:
                    message = json.loads(ws.recv(timeout=60))
                    assert message["type"] not in ("run_done", "error"), message
            except ConnectionClosed as exc:
                closed.append(f"{exc.rcvd.code if exc.rcvd else 'none'}")

    accepted: list[str] = []
    refused: list[int] = []
    stop_submitting = threading.Event()

    def submit() -> None:
        with httpx.Client(base_url=base, timeout=10) as client:
            while not stop_submitting.is_set():
                try:
                    response = client.post("/v1/runs", json={"graph": text_graph(), "target": "t"})
                except httpx.HTTPError:
                    return  # the listener is gone: no longer accepting
                if response.status_code == 201:
                    accepted.append(response.json()["runId"])
                else:
                    refused.append(response.status_code)
                    assert response.status_code == 503, response.text
                    assert int(response.headers["retry-after"]) >= 1

    watcher = threading.Thread(target=watch)
    watcher.start()
    submitters = [threading.Thread(target=submit) for _ in range(2)]
    for t in submitters:
        t.start()
    wait_until(lambda: len(accepted) > 3 or None, "submissions to flow")

    status = server.stop(signal.SIGTERM)  # waits for the exit (a liveness bound of 20 s)
    stop_submitting.set()
    for t in submitters:
        t.join()
    watcher.join(timeout=30)

    # uvicorn re-raises the stop signal once its graceful shutdown is complete, so the exit status
    # is SIGTERM's; the log shows the application's shutdown ran to the end first.
    assert status in (0, -signal.SIGTERM), server.log()
    assert "Application shutdown complete" in server.log()
    assert not watcher.is_alive() and closed, "the watching websocket was not closed"
    assert closed == ["1012"]  # "service restart": the client knows to come back
    assert ours(server.data_dir) == [], "a process of this server outlived it"
    with closing(sqlite3.connect(server.data_dir / "runs.db")) as db:
        row = db.execute("SELECT status, attempts FROM runs WHERE id = ?", (long_run,)).fetchone()
        leftovers = db.execute("SELECT COUNT(*) FROM runs WHERE status = 'running'").fetchone()
    assert tuple(row) == ("queued", 0)  # recorded for the next start, the attempt not counted
    assert leftovers[0] == 0

    server.start()
    for run_id in accepted:  # everything accepted before the stop finishes after it
        final = wait_until(
            lambda r=run_id: state(server, r) if state(server, r)["status"] in FINISHED else None,
            f"run {run_id} to finish",
        )
        assert final["status"] == "done"
    wait_until(lambda: state(server, long_run)["status"] == "running" or None, "the resume")
    assert httpx.delete(f"{server.base}/v1/runs/{long_run}").json()["status"] == "cancelled"
