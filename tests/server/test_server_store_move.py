"""Moving from SQLite to PostgreSQL (`inline-core move-store`): a real single server's history
goes into a real PostgreSQL database, and a server started on it carries on where it stopped."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import httpx
import pytest
from server_support import LiveServer, slow_graph, text_graph, wait_until
from store_support import claim, new_run, open_store, query

from inline_core.cli import main as cli
from inline_core.server.run_state import RunStatus
from tests.postgres_cluster import PostgresCluster


def post(server: LiveServer, graph: dict[str, object], target: str, **extra: object) -> str:
    response = httpx.post(
        server.base + "/v1/runs", json={"graph": graph, "target": target, **extra}, timeout=30
    )
    assert response.status_code == 201, response.text
    return str(response.json()["runId"])


def test_a_sqlite_server_moves_to_postgresql_and_carries_on(
    tmp_path: Path, postgres_cluster: PostgresCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    old = LiveServer(data_dir=tmp_path / "old", models_dir=tmp_path / "models", name="old")
    old.start()
    try:
        done = post(old, slow_graph(steps=2, delay=0.0, seed=42), "s", clientRunId="kept")
        wait_until(
            lambda: httpx.get(f"{old.base}/v1/runs/{done}").json()["status"] == "done" or None,
            "the first run",
        )
        before = httpx.get(f"{old.base}/v1/runs/{done}").json()
        [take] = before["takes"]
        data = httpx.get(old.base + take["uri"]).content
    finally:
        old.stop()
    # One run the old server left running (it was killed), one accepted just before the move.
    store = open_store(old.data_dir, None, "old-server")
    store.insert_run(new_run("run_left_running"))
    [left] = claim(store, limit=1)
    assert left.id == "run_left_running"
    store.insert_run(new_run("run_waiting"))
    store.close()

    url = postgres_cluster.new_database()
    assert cli(["move-store", "--data-dir", str(old.data_dir), "--to", url]) == 0
    said = capsys.readouterr().out
    assert "copied 3 runs, 1 takes" in said and "move" in said
    # Refused the second time: the target is no longer empty.
    assert cli(["move-store", "--data-dir", str(old.data_dir), "--to", url]) == 2

    shared = tmp_path / "shared"
    shared.mkdir()
    for folder in ("takes", "assets"):
        if (old.data_dir / folder).exists():
            shutil.move(old.data_dir / folder, shared / folder)
    new = LiveServer(data_dir=shared, models_dir=tmp_path / "models", database_url=url, name="new")
    new.start()
    try:
        after = httpx.get(f"{new.base}/v1/runs/{done}").json()
        assert after["status"] == "done" and after["takes"] == before["takes"]
        moved = httpx.get(new.base + take["uri"]).content
        assert hashlib.sha256(moved).hexdigest() == hashlib.sha256(data).hexdigest()
        body = {"graph": slow_graph(steps=2, delay=0.0, seed=42), "target": "s"}
        again = httpx.post(new.base + "/v1/runs", json={**body, "clientRunId": "kept"})
        assert again.status_code == 200 and again.json()["runId"] == done
        # The run left running was queued again by the move, and both now run here.
        for run_id in ("run_waiting", "run_left_running"):
            wait_until(
                lambda r=run_id: (
                    httpx.get(f"{new.base}/v1/runs/{r}").json()["status"] == "done" or None
                ),
                f"{run_id} to run on the new store",
            )
        fresh = post(new, text_graph("after the move"), "t")
        [(seq_done,)] = query(new.store_config, "SELECT seq FROM runs WHERE id = ?", (done,))
        [(seq_new,)] = query(new.store_config, "SELECT seq FROM runs WHERE id = ?", (fresh,))
        assert seq_new > seq_done
        reread = open_store(shared, url, "reader")
        try:
            record = reread.get_run("run_waiting")
            assert record is not None and record.status == RunStatus.DONE
        finally:
            reread.close()
    finally:
        new.close()
