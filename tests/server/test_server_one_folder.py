"""One data folder, one server: real server processes on one folder.

A second server on a folder in use refuses before it opens the store (naming the folder and the
holder's PID), and the first one's runs are untouched; after a kill -9 of the first, the lock is
gone with it and the second starts and recovers its runs. A port that is taken refuses the
start before any recovery. With PostgreSQL, servers of other names share one folder, and only a
second server of the same name is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from server_support import LiveServer, post_run, run_state, slow_graph, wait_finished, wait_until
from store_support import open_store

from tests.postgres_cluster import PostgresCluster

# Long enough (100 s) to be running whatever the second server does; every test cancels it.
LONG_STEPS, STEP_DELAY = 2000, 0.05


def submit(server: LiveServer, steps: int = LONG_STEPS, delay: float = STEP_DELAY) -> str:
    response = post_run(server, slow_graph(steps=steps, delay=delay), "s")
    assert response.status_code == 201, response.text
    return str(response.json()["runId"])


def running(server: LiveServer, run_id: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        state = run_state(server, run_id)
        return state if state["status"] == "running" else None

    return wait_until(probe, f"run {run_id} to be running")


def refused(server: LiveServer) -> str:
    """Launch `server`, which must exit by itself with status 2; its log."""
    proc = server.launch()
    assert proc.wait(timeout=120) == 2, server.log()
    return server.log()


def cancel(server: LiveServer, run_id: str) -> None:
    response = httpx.delete(f"{server.base}/v1/runs/{run_id}", timeout=30)
    assert response.status_code == 200, response.text
    assert wait_finished(server, run_id)["status"] == "cancelled"


def test_a_second_server_on_the_folder_refuses_and_leaves_the_runs_alone(tmp_path: Path) -> None:
    first = LiveServer(tmp_path / "data", tmp_path / "models", name="first")
    second = LiveServer(tmp_path / "data", tmp_path / "models", name="second")
    try:
        first.start()
        done = wait_finished(first, submit(first, steps=2, delay=0.0))
        run_id = submit(first)
        before = running(first, run_id)
        assert first.proc is not None

        said = refused(second)
        assert f"(PID {first.proc.pid})" in said
        assert str((tmp_path / "data").absolute()) in said and "--data-dir" in said
        assert "Traceback" not in said

        after = run_state(first, run_id)
        assert after["status"] == "running"
        assert (after["attempts"], after["startedAt"]) == (before["attempts"], before["startedAt"])
        assert run_state(first, done["runId"]) == done
        cancel(first, run_id)
    finally:
        first.close()
        second.close()


def test_after_a_kill_9_the_second_server_starts_and_recovers(tmp_path: Path) -> None:
    first = LiveServer(tmp_path / "data", tmp_path / "models", name="first")
    second = LiveServer(tmp_path / "data", tmp_path / "models", name="second")
    try:
        first.start()
        done = wait_finished(first, submit(first, steps=2, delay=0.0))
        run_id = submit(first)
        running(first, run_id)
        first.kill9()  # the kernel drops the lock with the process

        second.start()
        recovered = running(second, run_id)
        assert recovered["attempts"] == 2  # run again from the start, by the only server
        assert run_state(second, done["runId"]) == done
        cancel(second, run_id)
    finally:
        first.close()
        second.close()


def test_a_taken_port_refuses_before_recovery(tmp_path: Path) -> None:
    holder = LiveServer(tmp_path / "holder", tmp_path / "models", name="holder")
    crashed = LiveServer(tmp_path / "data", tmp_path / "models", name="crashed")
    try:
        crashed.start()
        run_id = submit(crashed)
        running(crashed, run_id)
        crashed.kill9()  # its run is left "running" in its store
        holder.start()

        on_taken_port = LiveServer(
            tmp_path / "data",
            tmp_path / "models",
            env={"INLINE_PORT": str(holder.port)},
            name="taken",
        )
        said = refused(on_taken_port)
        assert f"cannot listen on 127.0.0.1:{holder.port}: the port is in use" in said
        assert "--port" in said and "Traceback" not in said
        store = open_store(tmp_path / "data", None)
        try:
            left = store.get_run(run_id)
            assert left is not None and left.status.value == "running"  # not recovered
            assert left.attempts == 1
        finally:
            store.close()

        crashed.start()  # on a free port: now it recovers its run
        assert running(crashed, run_id)["attempts"] == 2
        cancel(crashed, run_id)
    finally:
        holder.close()
        crashed.close()


def test_postgres_servers_share_a_folder_but_not_a_name(
    tmp_path: Path, postgres_cluster: PostgresCluster
) -> None:
    url = postgres_cluster.new_database()
    shared, models = tmp_path / "shared", tmp_path / "models"
    one = LiveServer(shared, models, {"INLINE_SERVER_ID": "gpu-1"}, url, name="one")
    two = LiveServer(shared, models, {"INLINE_SERVER_ID": "gpu-2"}, url, name="two")
    again = LiveServer(shared, models, {"INLINE_SERVER_ID": "gpu-1"}, url, name="again")
    try:
        one.start()
        run_id = submit(one)
        before = running(one, run_id)
        two.start()  # another name on the same folder and database: welcome
        assert httpx.get(two.base + "/v1/health", timeout=30).json()["serverId"] == "gpu-2"

        said = refused(again)
        assert one.proc is not None and f"(PID {one.proc.pid})" in said
        assert "server id 'gpu-1'" in said and "--server-id" in said
        after = run_state(one, run_id)
        assert (after["status"], after["attempts"], after["startedAt"]) == (
            "running",
            before["attempts"],
            before["startedAt"],
        )
        cancel(one, run_id)
    finally:
        for server in (one, two, again):
            server.close()
