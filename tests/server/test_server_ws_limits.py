"""Caps on event websockets, in all and per run: the gate on its own, then a real uvicorn server
refusing the handshake past either cap with a 429 envelope, and taking sockets again once
others close."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import LiveServer, running_server, slow_graph, wait_until
from websockets.exceptions import InvalidStatus
from websockets.sync.client import ClientConnection, connect

from inline_core.errors import Busy
from inline_core.server.socket_gate import RESERVED_FDS, SocketGate, effective_total


def test_the_gate_counts_sockets_per_run_and_in_all() -> None:
    gate = SocketGate(max_total=3, max_per_run=2)
    gate.acquire("a")
    gate.acquire("a")
    with pytest.raises(Busy, match="INLINE_MAX_WEBSOCKETS_PER_RUN"):
        gate.acquire("a")
    gate.acquire("b")
    with pytest.raises(Busy, match="INLINE_MAX_WEBSOCKETS\\)"):
        gate.acquire("c")
    assert (gate.open_count(), gate.open_count("a"), gate.open_count("b")) == (3, 2, 1)
    gate.release("a")
    gate.acquire("c")
    for run_id in ("a", "b", "c"):
        gate.release(run_id)
    gate.release("never-opened")  # a stray release never goes negative
    assert gate.open_count() == 0 and gate.open_count("a") == 0


def test_the_total_stays_under_the_open_file_limit() -> None:
    assert effective_total(2000, None) == 2000
    assert effective_total(2000, 1024) == 1024 - RESERVED_FDS
    assert effective_total(100, 1024) == 100
    assert effective_total(100, 10) == 1
    assert SocketGate(5000, 64, fd_limit=4096).max_total == 4096 - RESERVED_FDS


@pytest.fixture
def server(tmp_path: Path, database_url: str | None) -> Iterator[LiveServer]:
    caps = {"INLINE_MAX_WEBSOCKETS": "3", "INLINE_MAX_WEBSOCKETS_PER_RUN": "2"}
    with running_server(tmp_path, caps, database_url) as live:
        yield live


def long_run(server: LiveServer) -> str:
    body = {"graph": slow_graph(steps=100_000, delay=0.01), "target": "s"}
    response = httpx.post(server.base + "/v1/runs", json=body, timeout=10)
    assert response.status_code == 201, response.text
    return str(response.json()["runId"])


def watch(sockets: ExitStack, server: LiveServer, run_id: str) -> ClientConnection:
    url = f"{server.ws_base}/v1/runs/{run_id}/events"
    ws = sockets.enter_context(connect(url, open_timeout=10))
    first = json.loads(ws.recv(timeout=10))
    assert first["type"] == "snapshot" and first["runId"] == run_id
    return ws


def refusal(server: LiveServer, run_id: str) -> tuple[int, dict[str, Any], str | None]:
    with pytest.raises(InvalidStatus) as refused:
        connect(f"{server.ws_base}/v1/runs/{run_id}/events", open_timeout=10)
    response = refused.value.response
    return (
        response.status_code,
        json.loads(response.body or b"{}"),
        response.headers.get("Retry-After"),
    )


def accepted_again(sockets: ExitStack, server: LiveServer, run_id: str) -> ClientConnection | None:
    try:
        return watch(sockets, server, run_id)
    except InvalidStatus:
        return None  # the server has not seen the other socket close yet


def test_sockets_past_a_cap_are_refused_with_a_429_envelope(server: LiveServer) -> None:
    first, second = long_run(server), long_run(server)
    with ExitStack() as sockets:
        watch(sockets, server, first)
        closing_one = watch(sockets, server, first)
        status, body, retry_after = refusal(server, first)
        assert status == 429 and retry_after is not None
        assert body["error"]["code"] == "busy"
        assert "INLINE_MAX_WEBSOCKETS_PER_RUN" in body["error"]["message"]

        watch(sockets, server, second)  # another run still has room
        status, body, _ = refusal(server, second)  # ... until the total is reached
        assert status == 429 and "INLINE_MAX_WEBSOCKETS)" in body["error"]["message"]

        # Refused handshakes hold nothing; a closed socket gives its slot back.
        closing_one.close()
        wait_until(lambda: accepted_again(sockets, server, first), "a free slot")
        # The server still answers everything else.
        assert httpx.get(server.base + "/v1/health", timeout=10).status_code == 200
