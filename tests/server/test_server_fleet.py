"""Several real server processes on loopback sharing one PostgreSQL store and one data dir: any
server answers for any run, runs go to servers that can serve them, a cancel reaches the holder,
and a server that lost its lease (paused past it) stops and writes nothing."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from server_support import (
    PLUGIN,
    LiveServer,
    post_run,
    read_events,
    run_state,
    running_fleet,
    slow_graph,
    wait_finished,
    wait_until,
)
from store_support import query

from inline_core.config import Config
from inline_core.server.app import create_app
from tests.postgres_cluster import PostgresCluster

TERMINAL = ("run_done", "error", "cancelled")


@pytest.fixture
def shared_url(postgres_cluster: PostgresCluster) -> str:
    return postgres_cluster.new_database()


def post(server: LiveServer, graph: dict[str, Any], target: str = "s", **extra: Any) -> str:
    response = post_run(server, graph, target, **extra)
    assert response.status_code == 201, response.text
    return str(response.json()["runId"])


def holder(server: LiveServer, run_id: str) -> str:
    def probe() -> str | None:
        now = run_state(server, run_id)
        return str(now["server"]) if now["status"] == "running" and now["server"] else None

    return wait_until(probe, f"run {run_id} to be held", timeout=60, interval=0.02)


@pytest.fixture
def pair(tmp_path: Path, shared_url: str) -> Iterator[list[LiveServer]]:
    with running_fleet(tmp_path, shared_url, 2) as servers:
        yield servers


def test_any_server_answers_for_any_run_and_streams_its_events(pair: list[LiveServer]) -> None:
    a, b = pair
    run_id = post(a, slow_graph(steps=40, delay=0.02, seed=11))
    held_by = holder(b, run_id)
    other = b if held_by == a.name else a  # a server that is not running it
    watched = read_events(other, run_id)
    assert watched[0]["type"] == "snapshot"
    assert watched[-1]["type"] == "run_done"
    assert sum(m["type"] in TERMINAL for m in watched) == 1
    steps = [m["step"] for m in watched if m["type"] == "progress" and m["nodeId"] == "s"]
    assert steps == sorted(steps) and steps[-1] == 40  # in order, the last tick included
    [take] = watched[-1]["takes"]
    # Status, takes and their bytes from both servers (one data dir on shared storage).
    for server in pair:
        final = run_state(server, run_id)
        assert final["status"] == "done" and final["takes"] == [take]
        assert final["server"] is None and final["attempts"] == 1
        data = httpx.get(server.base + take["uri"], timeout=30)
        assert data.status_code == 200 and data.headers["etag"] == f'"{take["hash"]}"'
    # Reconnecting after the end: the stored history gives snapshot then terminal.
    again = read_events(other, run_id)
    assert [m["type"] for m in again] == ["snapshot", "run_done"]
    health = httpx.get(a.base + "/v1/health", timeout=30).json()
    assert health["store"]["backend"] == "postgresql" and health["serverId"] == "s0"
    assert {s["serverId"] for s in health["servers"]} == {"s0", "s1"}


def test_the_holder_is_listed_and_a_cancel_from_any_server_stops_the_run(
    pair: list[LiveServer],
) -> None:
    a, b = pair
    run_id = post(a, slow_graph(steps=100_000, delay=0.01))
    held_by = holder(a, run_id)
    listed = httpx.get(b.base + "/v1/runs", timeout=30).json()["runs"]
    assert [(r["runId"], r["server"], r["queuePosition"]) for r in listed] == [(run_id, held_by, 0)]
    by_name = {s.name: s for s in pair}
    holding = by_name[held_by]
    health = httpx.get(holding.base + "/v1/health", timeout=30).json()
    assert health["leases"] == [run_id]
    other = b if holding is a else a
    cancelled = httpx.delete(f"{other.base}/v1/runs/{run_id}", timeout=30)
    assert cancelled.status_code == 200, cancelled.text
    assert wait_finished(other, run_id)["status"] == "cancelled"
    again = httpx.delete(f"{other.base}/v1/runs/{run_id}", timeout=30)
    assert again.status_code == 409 and again.json()["error"]["code"] == "conflict"


def test_runs_go_only_to_servers_that_have_their_model(tmp_path: Path, shared_url: str) -> None:
    # s0 has the checkpoint; s1 has none (its models folder is empty).
    checkpoints = tmp_path / "models-s0" / "checkpoints"
    checkpoints.mkdir(parents=True)
    (checkpoints / "a.safetensors").write_bytes(b"weights")
    with running_fleet(tmp_path, shared_url, 2) as (a, b):
        graph = slow_graph(steps=3, delay=0.01, node_type="test/with-model", model="a.safetensors")
        with_model = [post(a, graph) for _ in range(6)]
        plain = [post(b, slow_graph(steps=3, delay=0.01)) for _ in range(6)]
        # s1 cannot take a run naming a model it lacks: it refuses it at submit...
        refused = httpx.post(b.base + "/v1/runs", json={"graph": graph, "target": "s"})
        assert refused.status_code == 422 and refused.json()["error"]["code"] == "model_missing"
        for run_id in with_model + plain:
            assert wait_finished(a, run_id)["status"] == "done"
        # ... and never claims one another server accepted.
        started = query(
            a.store_config,
            "SELECT run_id, server_id FROM events WHERE type = 'run_started'",
        )
        ran_on = dict(started)
        assert {ran_on[run_id] for run_id in with_model} == {"s0"}


def test_a_run_no_server_can_serve_waits_without_holding_up_the_queue(config: Config) -> None:
    config = replace(config, run_workers=1)
    with TestClient(create_app(config)) as client:
        body = {"graph": slow_graph(steps=1, node_type="test/cuda-only"), "target": "s"}
        needs_cuda = client.post("/v1/runs", json=body).json()["runId"]
        later = client.post("/v1/runs", json={"graph": slow_graph(steps=1), "target": "s"})
        later_id = later.json()["runId"]
        wait_until(
            lambda: client.get(f"/v1/runs/{later_id}").json()["status"] == "done" or None,
            "the later run to finish",
        )
        waiting = client.get(f"/v1/runs/{needs_cuda}").json()
        assert waiting["status"] == "queued"
        listed = {r["runId"]: r for r in client.get("/v1/runs").json()["runs"]}
        assert listed[needs_cuda]["queuePosition"] == 1
        assert client.delete(f"/v1/runs/{needs_cuda}").json()["status"] == "cancelled"


def test_a_server_paused_past_its_lease_stops_its_run_and_writes_nothing(
    tmp_path: Path, shared_url: str
) -> None:
    lease = {"INLINE_LEASE_TIMEOUT_S": "2"}
    with running_fleet(tmp_path, shared_url, 2, lease) as (a, b):
        b.stop()  # only s0 may claim the run
        run_id = post(a, slow_graph(steps=60, delay=0.05, seed=5))
        assert holder(a, run_id) == "s0"
        assert a.proc is not None
        # Frozen mid-run (no heartbeat, no step) before s1 starts: s1's start takes longer than
        # the run's 3 s on a loaded machine, and the run must not have finished by then.
        os.kill(a.proc.pid, signal.SIGSTOP)
        try:
            b.start()

            # Its lease expires in the database; s1 takes the run over and finishes it.
            def taken_over() -> bool | None:
                now = run_state(b, run_id)
                return True if now["status"] == "done" or now["attempts"] == 2 else None

            wait_until(taken_over, "s1 to take the run over", timeout=60, interval=0.05)
        finally:
            os.kill(a.proc.pid, signal.SIGCONT)
        final = wait_finished(b, run_id)
        assert final["status"] == "done" and final["attempts"] == 2
        # s0 woke up past its lease: it stopped the run without writing a thing.
        wait_until(lambda: "wrote nothing" in a.log(20_000) or None, "s0 to stop the run")
        events = query(
            a.store_config,
            "SELECT seq, server_id, attempt, type FROM events WHERE run_id = ? ORDER BY seq",
            (run_id,),
        )
        b_started = next(
            seq for seq, server, _a, kind in events if (server, kind) == ("s1", "run_started")
        )
        assert all(server == "s1" for seq, server, _a, _k in events if seq >= b_started)
        assert all(attempt == 1 for _s, server, attempt, _k in events if server == "s0")
        [(take_id, path)] = query(
            a.store_config, "SELECT id, path FROM takes WHERE run_id = ?", (run_id,)
        )
        takes_dir = a.data_dir / "takes"
        assert sorted(p.name for p in takes_dir.iterdir() if not p.name.startswith(".")) == [
            Path(path).name
        ]
        assert take_id in Path(path).name
        assert httpx.get(a.base + "/v1/health", timeout=30).json()["leases"] == []


def test_a_server_whose_renewals_stop_keeps_a_run_that_makes_progress(
    tmp_path: Path, shared_url: str
) -> None:
    """Its lease keeper stopped (renewals starved, as on an overloaded machine), a server keeps
    a run whose steps go on: each journal write extends the lease, so another server, sweeping
    for expired leases every second, never takes it."""
    checkpoints = tmp_path / "models" / "checkpoints"
    checkpoints.mkdir(parents=True)
    (checkpoints / "a.safetensors").write_bytes(b"weights")  # only this server can run it
    config = Config(
        models_dir=tmp_path / "models",
        data_dir=tmp_path / "data",
        database_url=shared_url,
        profile="cpu",
        dtype="float32",
        plugins=(PLUGIN,),
        run_workers=1,
        min_free_disk_mb=0,
        server_id="renewing-none",
        lease_timeout_s=1.0,
    )
    app = create_app(config)
    with (
        TestClient(app) as client,
        running_fleet(tmp_path / "fleet", shared_url, 1, {"INLINE_LEASE_TIMEOUT_S": "1"}),
    ):
        app.state.services.manager.leases.close()  # no renewal from here on
        graph = slow_graph(
            steps=100, delay=0.05, node_type="test/with-model", model="a.safetensors"
        )
        run_id = client.post("/v1/runs", json={"graph": graph, "target": "s"}).json()["runId"]

        def finished() -> dict[str, Any] | None:
            now = client.get(f"/v1/runs/{run_id}").json()
            return now if now["status"] in ("done", "error", "cancelled") else None

        final = wait_until(finished, "the run to finish", timeout=120, interval=0.05)
    assert final["status"] == "done" and final["attempts"] == 1, final
    started = query(
        config, "SELECT server_id FROM events WHERE run_id = ? AND type = 'run_started'", (run_id,)
    )
    assert started == [("renewing-none",)]  # claimed once: never taken, never given back
