"""Graceful shutdown in process: running runs go back to the queue, new work is refused (503)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from server_support import slow_graph, text_graph, wait_until
from store_support import query

from inline_core.config import Config
from inline_core.errors import Unavailable
from inline_core.server.app import create_app
from inline_core.server.bootstrap import build_services


def test_shutdown_requeues_running_runs_and_refuses_new_ones(config: Config) -> None:
    services = build_services(config)
    with TestClient(create_app(config, services)) as client:
        run_id = client.post(
            "/v1/runs", json={"graph": slow_graph(steps=100_000, delay=0.01), "target": "s"}
        ).json()["runId"]
        wait_until(
            lambda: client.get(f"/v1/runs/{run_id}").json()["fraction"] > 0 or None,
            "the run to make progress",
        )
    # The app's lifespan ended: the run stopped at a step boundary and is queued again.
    [row] = query(config, "SELECT status, attempts FROM runs WHERE id = ?", (run_id,))
    assert row == ("queued", 0)
    with pytest.raises(Unavailable) as refused:
        services.manager.submit(text_graph(), "t")
    assert refused.value.status == 503

    # The next start picks it up again (it would run to the end; cancel it to keep this short).
    with TestClient(create_app(config)) as client:
        wait_until(
            lambda: client.get(f"/v1/runs/{run_id}").json()["status"] == "running" or None,
            "the recovered run to start",
        )
        assert client.delete(f"/v1/runs/{run_id}").json()["status"] == "cancelled"
