"""Runs through the ASGI app: submit, read, list, idempotency, cancel, failures, the websocket."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from server_support import boom_graph, slow_graph, text_graph, wait_until
from starlette.testclient import WebSocketDenialResponse
from store_support import query

from inline_core.config import Config
from inline_core.server.app import create_app
from inline_core.server.stores.run_store import RunStore

FINISHED = ("done", "error", "cancelled")


def submit(client: TestClient, graph: dict[str, Any], target: str, **extra: Any) -> str:
    response = client.post("/v1/runs", json={"graph": graph, "target": target, **extra})
    assert response.status_code == 201, response.text
    body = response.json()
    assert set(body) == {"runId", "status"}
    assert response.headers["location"] == f"/v1/runs/{body['runId']}"
    return str(body["runId"])


def run_state(client: TestClient, run_id: str) -> dict[str, Any]:
    response = client.get(f"/v1/runs/{run_id}")
    assert response.status_code == 200, response.text
    return response.json()


def wait_status(client: TestClient, run_id: str, statuses: tuple[str, ...]) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        state = run_state(client, run_id)
        return state if state["status"] in statuses else None

    return wait_until(probe, f"run {run_id} to be {statuses}")


def test_a_text_run_completes_with_the_contract_shape(client: TestClient) -> None:
    run_id = submit(client, text_graph("hi"), "t")
    state = wait_status(client, run_id, FINISHED)
    assert state["status"] == "done"
    assert state["runId"] == run_id and state["target"] == "t"
    assert state["fraction"] == 1.0
    assert state["nodes"] == {"t": {"state": "done", "fraction": 1.0}}
    assert state["takes"] == [] and state["error"] is None
    assert state["createdAt"].endswith("Z") and state["finishedAt"] is not None
    assert state["graph"]["nodes"][0]["params"] == {"text": "hi"}


def test_an_import_result_posts_as_it_came_back(client: TestClient) -> None:
    run_id = submit(client, text_graph("hi"), "t", skipped=[], warnings=["cfg clamped"])
    assert wait_status(client, run_id, FINISHED)["status"] == "done"
    misspelt = client.post(
        "/v1/runs", json={"graph": text_graph("hi"), "target": "t", "clientRunID": "x"}
    )
    assert misspelt.status_code == 422
    assert misspelt.json()["error"]["code"] == "invalid_request"


def test_a_run_of_nodes_that_take_no_interactions_reads_none(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a node that renders a video chunk by chunk takes interactions (any other run's are
    refused), so no other run reads its stored ones from the store as it starts."""
    reads: list[str] = []
    real = RunStore.interactions_for_run

    def counted(self: RunStore, run_id: str) -> list[dict[str, Any]]:
        reads.append(run_id)
        return real(self, run_id)

    monkeypatch.setattr(RunStore, "interactions_for_run", counted)
    run_id = submit(client, text_graph("hi"), "t")
    assert wait_status(client, run_id, FINISHED)["status"] == "done"
    assert reads == []


def test_the_run_is_committed_before_post_answers(client: TestClient, config: Config) -> None:
    run_id = submit(client, slow_graph(steps=1000, delay=0.01), "s")
    # Read the database directly, as a crash-recovering process would.
    [row] = query(config, "SELECT target, graph FROM runs WHERE id = ?", (run_id,))
    assert row[0] == "s"
    assert '"seed":-1' not in row[1]  # the seed was resolved before the run was stored
    client.delete(f"/v1/runs/{run_id}")


def test_a_run_with_a_take(client: TestClient, config: Config) -> None:
    run_id = submit(client, slow_graph(steps=3, delay=0.0, seed=1234), "s")
    state = wait_status(client, run_id, FINISHED)
    assert state["status"] == "done", state
    assert state["nodes"]["p"]["state"] in ("done", "cached")
    assert state["nodes"]["s"]["state"] == "done"
    [take] = state["takes"]
    assert take["runId"] == run_id and take["nodeId"] == "s" and take["kind"] == "image"
    assert take["params"]["seed"] == 1234
    assert take["uri"] == f"/v1/takes/{take['id']}/bytes"
    data = client.get(take["uri"]).content
    assert take["hash"] == "sha256-" + hashlib.sha256(data).hexdigest()
    assert client.get(f"/v1/takes/{take['id']}").json() == take
    assert len(list(config.takes_dir.iterdir())) == 1


def test_a_random_seed_is_resolved_and_reported(client: TestClient) -> None:
    run_id = submit(client, slow_graph(steps=1, delay=0.0), "s")
    state = wait_status(client, run_id, FINISHED)
    seed = state["takes"][0]["params"]["seed"]
    assert isinstance(seed, int) and seed >= 0
    assert state["graph"]["nodes"][1]["params"]["seed"] == seed


def test_client_run_id_is_idempotent_and_conflicts_on_another_graph(client: TestClient) -> None:
    body = {"graph": text_graph("one"), "target": "t", "clientRunId": "c-1"}
    first = client.post("/v1/runs", json=body)
    again = client.post("/v1/runs", json=body)
    assert first.status_code == 201 and again.status_code == 200
    assert again.json()["runId"] == first.json()["runId"]
    other = client.post("/v1/runs", json={**body, "graph": text_graph("two")})
    assert other.status_code == 409
    assert other.json()["error"]["code"] == "conflict"
    runs = client.get("/v1/runs").json()["runs"]
    assert [r["runId"] for r in runs] == [first.json()["runId"]]


def test_a_runner_exception_ends_the_run_with_an_error(client: TestClient) -> None:
    run_id = submit(client, boom_graph(), "b")
    state = wait_status(client, run_id, FINISHED)
    assert state["status"] == "error"
    assert state["error"]["code"] == "run_failed"
    assert state["error"]["nodeId"] == "b"
    assert "boom" in state["error"]["message"]
    assert "Traceback" not in state["error"]["message"]
    assert state["nodes"]["b"]["state"] == "error"


def test_cancel_running_then_finished(client: TestClient) -> None:
    run_id = submit(client, slow_graph(steps=100_000, delay=0.01), "s")
    # A run is "running" from its first node; cancel once `s` runs, so `p` has finished.
    wait_until(
        lambda: run_state(client, run_id)["nodes"]["s"]["state"] == "running",
        f"node s of {run_id} to run",
    )
    response = client.delete(f"/v1/runs/{run_id}")
    assert response.status_code == 200
    assert response.json() == {"runId": run_id, "status": "cancelled"}
    state = run_state(client, run_id)
    assert state["status"] == "cancelled" and state["takes"] == []
    # What finished stays so; what the cancel stopped shows cancelled, never queued.
    states = {node_id: node["state"] for node_id, node in state["nodes"].items()}
    assert states == {"p": "done", "s": "cancelled"}
    again = client.delete(f"/v1/runs/{run_id}")
    assert again.status_code == 409 and again.json()["error"]["code"] == "conflict"
    assert client.delete("/v1/runs/run_nope").status_code == 404


@pytest.fixture
def one_worker(config: Config) -> Iterator[TestClient]:
    with TestClient(create_app(replace(config, run_workers=1, max_queue=2))) as c:
        yield c


def test_queue_positions_cancel_queued_and_a_full_queue(one_worker: TestClient) -> None:
    client = one_worker
    running = submit(client, slow_graph(steps=100_000, delay=0.01), "s")
    wait_status(client, running, ("running",))
    first = submit(client, text_graph("a"), "t")
    second = submit(client, text_graph("b"), "t")

    full = client.post("/v1/runs", json={"graph": text_graph("c"), "target": "t"})
    assert full.status_code == 429
    assert full.json()["error"]["code"] == "busy"
    assert int(full.headers["retry-after"]) >= 1

    listed = client.get("/v1/runs").json()["runs"]
    assert [(r["runId"], r["status"], r["queuePosition"]) for r in listed] == [
        (second, "queued", 2),
        (first, "queued", 1),
        (running, "running", 0),
    ]
    assert client.get("/v1/runs?limit=1").json()["runs"][0]["runId"] == second

    cancelled = client.delete(f"/v1/runs/{first}")
    assert cancelled.json() == {"runId": first, "status": "cancelled"}
    state = run_state(client, first)
    assert state["status"] == "cancelled"
    assert {node["state"] for node in state["nodes"].values()} == {"cancelled"}
    assert client.get("/v1/runs").json()["runs"][0]["queuePosition"] == 1

    client.delete(f"/v1/runs/{running}")
    assert wait_status(client, second, FINISHED)["status"] == "done"


def read_until_terminal(ws: Any) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    while True:
        message = ws.receive_json()
        messages.append(message)
        if message["type"] in ("run_done", "error", "cancelled"):
            break
    closing = ws.receive()
    assert closing["type"] == "websocket.close" and closing["code"] == 1000
    return messages


def collect(client: TestClient, run_id: str) -> list[dict[str, Any]]:
    with client.websocket_connect(f"/v1/runs/{run_id}/events") as ws:
        return read_until_terminal(ws)


def test_websocket_streams_snapshot_progress_node_done_and_one_terminal(
    one_worker: TestClient, config: Config
) -> None:
    client = one_worker
    blocker = submit(client, slow_graph(steps=100_000, delay=0.01), "s")
    wait_status(client, blocker, ("running",))
    run_id = submit(client, slow_graph(steps=20, delay=0.0), "s")
    with client.websocket_connect(f"/v1/runs/{run_id}/events") as ws:
        snapshot = ws.receive_json()
        assert snapshot["type"] == "snapshot" and snapshot["runId"] == run_id
        assert snapshot["state"]["status"] == "queued"
        assert snapshot["state"]["nodes"] == {
            "p": {"state": "queued", "fraction": 0.0},
            "s": {"state": "queued", "fraction": 0.0},
        }
        client.delete(f"/v1/runs/{blocker}")  # frees the worker: our run starts now
        messages = read_until_terminal(ws)
        # By the time run_done was sent, the run and its take were already durable.
        [(status,)] = query(config, "SELECT status FROM runs WHERE id = ?", (run_id,))
        [(takes,)] = query(config, "SELECT COUNT(*) FROM takes WHERE run_id = ?", (run_id,))
        assert status == "done" and takes == 1
    types = [m["type"] for m in messages]
    assert types[0] == "run_started" and types[-1] == "run_done"
    assert sum(t in ("run_done", "error", "cancelled") for t in types) == 1
    done = [m for m in messages if m["type"] == "node_done"]
    assert [m["nodeId"] for m in done] == ["p", "s"]
    slow_done = done[1]
    assert len(slow_done["takes"]) == 1 and slow_done["cached"] is False
    progress = [m for m in messages if m["type"] == "progress" and m["nodeId"] == "s"]
    assert progress, "the slow node reports progress"
    # Coalescing may merge ticks, but the node's last reported step always arrives.
    steps = [m["step"] for m in progress if m["step"] is not None]
    assert steps and steps[-1] == 20 and steps == sorted(steps)
    assert all(m["stepCount"] == 20 for m in progress if m["step"] is not None)
    assert messages[-1]["takes"] == slow_done["takes"]


def test_websocket_on_a_finished_run_gives_snapshot_then_terminal(client: TestClient) -> None:
    run_id = submit(client, boom_graph(), "b")
    wait_status(client, run_id, FINISHED)
    messages = collect(client, run_id)
    assert [m["type"] for m in messages] == ["snapshot", "error"]
    assert messages[0]["state"]["status"] == "error"
    assert messages[1]["error"]["nodeId"] == "b" and messages[1]["nodeId"] == "b"


def test_websocket_for_a_cancelled_run(client: TestClient) -> None:
    run_id = submit(client, slow_graph(steps=100_000, delay=0.01), "s")
    wait_status(client, run_id, ("running",))
    with client.websocket_connect(f"/v1/runs/{run_id}/events") as ws:
        assert ws.receive_json()["type"] == "snapshot"
        client.delete(f"/v1/runs/{run_id}")
        # The snapshot comes from the stored history, which may trail the run by a write:
        # deltas after it may still hold a node that finished just before.
        while (message := ws.receive_json())["type"] in ("progress", "node_done"):
            pass
        assert message["type"] == "cancelled" and message["runId"] == run_id


def test_websocket_for_an_unknown_run_is_refused_with_the_envelope(client: TestClient) -> None:
    with pytest.raises(WebSocketDenialResponse) as denied:
        with client.websocket_connect("/v1/runs/run_nope/events"):
            pass
    assert denied.value.status_code == 404
    assert denied.value.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"{not json", 422, "invalid_request"),
        (b"[1, 2]", 422, "invalid_request"),
        (b'{"target": "t"}', 422, "invalid_request"),
        (b'{"graph": {"nodes": []}}', 422, "invalid_request"),
        (b'{"graph": {"nodes": []}, "target": "t"}', 422, "invalid_graph"),
        (b'{"graph": "nope", "target": "t"}', 422, "invalid_graph"),
        (
            b'{"graph": {"nodes": [{"id": "t", "type": "input/text"}]}, "target": "x"}',
            422,
            "invalid_request",
        ),
        (
            b'{"graph": {"nodes": [{"id": "t", "type": "input/text"}]}, "target": 5}',
            422,
            "invalid_request",
        ),
        (
            b'{"graph": {"nodes": [{"id": "t", "type": "input/text"}]}, "target": "t", '
            b'"clientRunId": 7}',
            422,
            "invalid_request",
        ),
        (
            b'{"graph": {"schemaVersion": 9, "nodes": [{"id": "t", "type": "input/text"}]}, '
            b'"target": "t"}',
            422,
            "invalid_graph",
        ),
        (b"\xff\xfe", 422, "invalid_request"),
        (b'{"graph": ' + b"[" * 100 + b"]" * 100 + b', "target": "t"}', 422, "invalid_request"),
        (b'{"graph": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", 422, "invalid_request"),
    ],
)
def test_bad_submissions_get_the_envelope(
    client: TestClient, body: bytes, status: int, code: str
) -> None:
    response = client.post("/v1/runs", content=body, headers={"content-type": "application/json"})
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code
    assert set(response.json()) == {"error"}


def test_graph_errors_name_the_node(client: TestClient) -> None:
    graph = {"nodes": [{"id": "x", "type": "no/such-node"}]}
    response = client.post("/v1/runs", json={"graph": graph, "target": "x"})
    assert response.status_code == 422
    assert response.json()["error"] == {
        "code": "invalid_graph",
        "message": response.json()["error"]["message"],
        "nodeId": "x",
    }
    bad_param = slow_graph()
    bad_param["nodes"][1]["params"]["steps"] = "many"
    response = client.post("/v1/runs", json={"graph": bad_param, "target": "s"})
    assert response.status_code == 422 and response.json()["error"]["nodeId"] == "s"


def test_a_body_over_the_limit_is_413(config: Config) -> None:
    with TestClient(create_app(replace(config, max_body_mb=1))) as client:
        big = b'{"graph": "' + b"x" * (1024 * 1024 + 10) + b'", "target": "t"}'
        response = client.post("/v1/runs", content=big)
        assert response.status_code == 413
        assert response.json()["error"]["code"] == "payload_too_large"


@pytest.mark.parametrize("route", ["/v1/runs", "/v1/downloads"])
def test_list_limit_is_validated(client: TestClient, route: str) -> None:
    """Both list routes read `?limit=` alike (`http_io.list_limit`)."""
    # A superscript two is a digit to `str.isdigit` and no number to `int` (it was a 500), as
    # is a number over Python's 4300-digit bound.
    for bad in ("0", "abc", "100000", "-1", "501", "%C2%B2", "9" * 5000):
        response = client.get(f"{route}?limit={bad}")
        assert response.status_code == 422 and response.json()["error"] == {
            "code": "invalid_request",
            "message": "'limit' must be a whole number from 1 to 500",
        }
    assert client.get(f"{route}?limit=500").status_code == 200


def test_unknown_runs_and_takes_are_404(client: TestClient, tmp_path: Path) -> None:
    for path in ("/v1/runs/run_nope", "/v1/takes/tk_nope", "/v1/takes/tk_nope/bytes"):
        response = client.get(path)
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
