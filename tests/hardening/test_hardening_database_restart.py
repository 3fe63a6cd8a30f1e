"""The database itself restarts under load: two servers share a real PostgreSQL that is stopped
the hard way (`pg_ctl -m immediate`: its processes end at once, as in a crash) while clients
submit and runs execute, and started again a few seconds later.

While it is away submissions answer 503 with Retry-After (the clients retry, same clientRunId);
runs that were executing finish and their results commit when it returns, on their first attempt;
afterwards everything the clients were told is in the store, once, intact."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from fleet_crash import check_history

from tests.hardening.crash_harness import verify_store
from tests.postgres_cluster import PostgresCluster
from tests.server.server_support import LiveServer, running_fleet, slow_graph, wait_until
from tests.server.store_support import query

OUTAGE_S = 3.0


class Clients:
    """Submit slow runs to random servers until told to stop; retry a refusal as told."""

    def __init__(self, servers: list[LiveServer], rng: random.Random) -> None:
        self.servers = servers
        self.rng = rng
        self.accepted: dict[str, str] = {}
        self.refused: list[tuple[int, str | None]] = []  # (status, Retry-After) of each refusal
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def submit(self, body: dict[str, Any]) -> None:
        while True:
            server = self.rng.choice(self.servers)
            try:
                response = httpx.post(server.base + "/v1/runs", json=body, timeout=30)
            except httpx.HTTPError:
                time.sleep(0.05)
                continue
            if response.status_code in (200, 201):
                with self.lock:
                    self.accepted[body["clientRunId"]] = response.json()["runId"]
                return
            assert response.status_code == 503, response.text
            assert response.json()["error"]["code"] == "unavailable"
            with self.lock:
                self.refused.append((503, response.headers.get("retry-after")))
            time.sleep(0.1)  # a real client waits Retry-After; the test need not

    def client(self, name: str) -> None:
        n = 0
        while not self.stop.is_set():
            n += 1
            graph = slow_graph(steps=self.rng.randint(20, 60), delay=0.02)
            self.submit({"graph": graph, "target": "s", "clientRunId": f"{name}-{n}"})
            self.stop.wait(self.rng.uniform(0.05, 0.15))


def test_a_database_restart_under_load_loses_nothing_and_runs_in_flight_commit(
    tmp_path: Path, own_postgres: PostgresCluster
) -> None:
    url = own_postgres.new_database()
    with running_fleet(tmp_path, url, 2) as servers:
        clients = Clients(servers, random.Random(3))
        threads = [threading.Thread(target=clients.client, args=(f"c{i}",)) for i in range(4)]
        for thread in threads:
            thread.start()
        try:
            config = servers[0].store_config

            def busy() -> list[str] | None:
                running = query(config, "SELECT id FROM runs WHERE status = 'running'")
                return [r[0] for r in running] if len(running) >= 4 else None

            in_flight = wait_until(busy, "runs to be running")
            own_postgres.stop("immediate")
            time.sleep(OUTAGE_S)
            own_postgres.start()
            time.sleep(3.0)  # and the load goes on
        finally:
            clients.stop.set()
            for thread in threads:
                thread.join(timeout=120)

        def drained() -> bool | None:
            [(left,)] = query(
                config, "SELECT COUNT(*) FROM runs WHERE status IN ('queued', 'running')"
            )
            return True if left == 0 else None

        wait_until(drained, "every accepted run to finish", timeout=120, interval=0.2)
        totals = verify_store(config, servers[0].data_dir / "takes", clients.accepted)
        logs = "".join(server.logs() for server in servers)

    assert totals.statuses == {"done": len(clients.accepted)}
    # The outage was felt: submissions were refused with 503 and a Retry-After.
    assert clients.refused and all(after is not None for _s, after in clients.refused)
    assert "is unreachable" in logs and "reachable again" in logs
    # The runs executing when the database went away finished, on their first attempt.
    placeholders = ", ".join("?" for _ in in_flight)
    ended = query(
        config, f"SELECT status, attempts FROM runs WHERE id IN ({placeholders})", in_flight
    )
    assert ended == [("done", 1)] * len(in_flight)
    check_history(config, totals, list(clients.accepted.values()))
