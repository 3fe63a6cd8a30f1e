"""A cached Wan run through the HTTP API, in process (ASGI) and on a real uvicorn: its take
records the settings it used and what its cache skipped, and `/v1/health` totals every cached
render's counts. The kit's residuals move 0.05-0.12 a step, so threshold 0.5 reuses as often as
the cap allows: of six steps, per row, 2 and 3 reuse (after two warmup steps), 4 computes, 5
reuses."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi.testclient import TestClient
from test_wan_server import finished_state, wan_graph

from tests.server.server_support import LiveServer, post_run, wait_finished

CACHE = {"method": "dbcache", "threshold": 0.5, "warmup": 2, "frontBlocks": 1}
CACHE["maxConsecutive"] = 2
# Two rows (the prompt and the negative one), six steps each, two blocks a step.
COUNTS = {"computedSteps": 6, "reusedSteps": 6, "skippedBlocks": 6, "computedBlocks": 18}


def submit(client: TestClient, options: dict[str, Any]) -> dict[str, Any]:
    body = {"graph": wan_graph(steps=6, format="png"), "target": "w", "options": options}
    response = client.post("/v1/runs", json=body)
    assert response.status_code == 201, response.text
    return finished_state(client, str(response.json()["runId"]))


def test_a_cached_run_reports_what_it_skipped_in_its_take_and_in_health(
    client: TestClient,
) -> None:
    before = client.get("/v1/health").json()["stepCache"]
    assert before == {"renders": 0, **dict.fromkeys(COUNTS, 0)}
    state = submit(client, {"cache": CACHE})
    assert state["status"] == "done", state
    (take,) = state["takes"]
    assert take["params"]["cache"]["threshold"] == 0.5
    assert take["params"]["cacheCounts"] == COUNTS
    assert client.get("/v1/health").json()["stepCache"] == {"renders": 1, **COUNTS}

    plain = submit(client, {"cache": {"method": "none"}})
    assert plain["status"] == "done", plain
    assert "cacheCounts" not in plain["takes"][0]["params"]
    assert client.get("/v1/health").json()["stepCache"] == {"renders": 1, **COUNTS}


def test_a_live_server_reports_the_counts_over_http(wan_live: LiveServer) -> None:
    live = wan_live  # the shared server (conftest.py): its totals so far, then this run's
    before: dict[str, int] = (
        httpx.get(f"{live.base}/v1/health", timeout=30).json().get("stepCache") or {}
    )
    graph = wan_graph(steps=6, format="png")
    response = post_run(live, graph, "w", options={"cache": CACHE})
    assert response.status_code == 201, response.text
    state = wait_finished(live, str(response.json()["runId"]), timeout=120)
    assert state["status"] == "done", live.log()
    assert state["takes"][0]["params"]["cacheCounts"] == COUNTS
    health = httpx.get(f"{live.base}/v1/health", timeout=30).json()
    totals: dict[str, int] = health["stepCache"]
    added = {k: v - before.get(k, 0) for k, v in totals.items()}
    assert added == {"renders": 1, **COUNTS}
