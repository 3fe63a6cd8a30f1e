"""The durable run store on its own: inserts, idempotency, terminal commits, recovery."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from inline_core.errors import Conflict
from inline_core.media import MediaKind
from inline_core.server.run_state import NewRun, NodeState, NodeStatus, RunStatus
from inline_core.server.run_store import RunStore
from inline_core.takes import Take


def new_run(run_id: str, client_run_id: str | None = None, request_hash: str = "h1") -> NewRun:
    return NewRun(
        id=run_id,
        target="t",
        graph={"schemaVersion": 1, "nodes": [{"id": "t", "type": "input/text"}]},
        request_hash=request_hash,
        client_run_id=client_run_id,
        node_ids=("t",),
        created_at=time.time(),
    )


def take(run_id: str, take_id: str) -> Take:
    return Take(
        id=take_id,
        run_id=run_id,
        node_id="t",
        kind=MediaKind.IMAGE,
        uri=f"/v1/takes/{take_id}/bytes",
        hash="sha256-" + "0" * 64,
        params={"seed": 7},
        created_at=time.time(),
        path="/nowhere.png",
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RunStore]:
    s = RunStore(tmp_path / "runs.db")
    yield s
    s.close()


def test_insert_is_durable_and_readable_from_a_new_store(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    record, created = store.insert_run(new_run("run_a", "client-1"))
    assert created and record.status == RunStatus.QUEUED
    assert record.nodes == {"t": NodeState()}
    store.close()
    again = RunStore(tmp_path / "runs.db")
    stored = again.get_run("run_a")
    assert stored is not None
    assert stored.client_run_id == "client-1"
    assert stored.graph["nodes"][0]["type"] == "input/text"
    assert again.find_by_client_run_id("client-1") == stored
    journal = again._reader().execute("PRAGMA journal_mode").fetchone()[0]  # pyright: ignore[reportPrivateUsage]
    assert journal == "wal"
    again.close()


def test_client_run_id_repeats_or_conflicts(store: RunStore) -> None:
    first, created = store.insert_run(new_run("run_a", "same", "h1"))
    assert created
    repeat, created_again = store.insert_run(new_run("run_b", "same", "h1"))
    assert not created_again and repeat.id == first.id
    with pytest.raises(Conflict):
        store.insert_run(new_run("run_c", "same", "h2"))
    assert store.get_run("run_b") is None and store.get_run("run_c") is None


def test_concurrent_inserts_share_commits_and_all_land(store: RunStore) -> None:
    def submit(i: int) -> None:
        store.insert_run(new_run(f"run_{i}"))

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(store.list_runs(limit=500)) == 64


def test_a_failing_write_does_not_undo_the_others_in_its_group(store: RunStore) -> None:
    store.insert_run(new_run("run_a", "dup", "h1"))
    futures = [
        store.insert_run_future(new_run("run_x", "dup", "other")),
        store.insert_run_future(new_run("run_y")),
    ]
    with pytest.raises(Conflict):
        futures[0].result()
    assert futures[1].result()[1]
    assert store.get_run("run_y") is not None


def test_a_broken_write_fails_alone(store: RunStore) -> None:
    def broken(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO runs (id) VALUES ('half a row')")  # violates NOT NULL

    before = store.insert_run_future(new_run("run_before"))
    bad = store._submit(broken)  # pyright: ignore[reportPrivateUsage]
    after = store.insert_run_future(new_run("run_after"))
    with pytest.raises(sqlite3.IntegrityError):
        bad.result()
    assert before.result()[1] and after.result()[1]
    assert {r.id for r in store.list_runs()} == {"run_before", "run_after"}


def test_finish_commits_state_and_takes_together(store: RunStore) -> None:
    store.insert_run(new_run("run_a"))
    assert store.mark_running("run_a")
    done = {"t": NodeState(NodeStatus.DONE, 1.0)}
    first = take("run_a", "tk_1")
    store.finish_future("run_a", RunStatus.DONE, nodes=done, fraction=1.0, takes=[first]).result()
    record = store.get_run("run_a")
    assert record is not None
    assert record.status == RunStatus.DONE and record.attempts == 1
    assert record.finished_at is not None and record.nodes == done
    assert [t.id for t in store.takes_for_run("run_a")] == ["tk_1"]
    assert store.get_take("tk_1") == first
    # A finished run cannot be finished again, and its take cannot be recorded twice.
    with pytest.raises(Conflict):
        store.finish_future("run_a", RunStatus.ERROR, nodes=done, fraction=1.0).result()
    assert len(store.all_takes()) == 1


def test_a_take_id_is_recorded_once_even_if_offered_twice(store: RunStore) -> None:
    store.insert_run(new_run("run_a"))
    store.mark_running("run_a")
    twice = [take("run_a", "tk_same"), take("run_a", "tk_same")]
    store.finish_future("run_a", RunStatus.DONE, nodes={}, fraction=1.0, takes=twice).result()
    assert [t.id for t in store.all_takes()] == ["tk_same"]


def test_recover_on_start(store: RunStore) -> None:
    store.insert_run(new_run("run_queued"))
    store.insert_run(new_run("run_retry"))
    store.insert_run(new_run("run_exhausted"))
    store.insert_run(new_run("run_done"))
    for run_id in ("run_retry", "run_exhausted", "run_done"):
        store.mark_running(run_id)
    store.finish_future("run_done", RunStatus.DONE, nodes={}, fraction=1.0).result()
    # Pretend run_exhausted already ran (and was interrupted) three times.
    store._submit(  # pyright: ignore[reportPrivateUsage]
        lambda c: c.execute("UPDATE runs SET attempts = 3 WHERE id = 'run_exhausted'")
    ).result()

    queued = store.recover_on_start(max_retries=2)

    assert [r.id for r in queued] == ["run_queued", "run_retry"]
    retry = store.get_run("run_retry")
    assert retry is not None and retry.status == RunStatus.QUEUED and retry.attempts == 1
    exhausted = store.get_run("run_exhausted")
    assert exhausted is not None and exhausted.status == RunStatus.ERROR
    assert exhausted.error is not None and "interrupted 3 times" in exhausted.error["message"]
    done = store.get_run("run_done")
    assert done is not None and done.status == RunStatus.DONE
    assert store.integrity_check() == "ok"


def test_requeue_and_cancel_queued(store: RunStore) -> None:
    store.insert_run(new_run("run_a"))
    store.mark_running("run_a")
    assert store.requeue("run_a", nodes={"t": NodeState()}, refund_attempt=True)
    record = store.get_run("run_a")
    assert record is not None and record.status == RunStatus.QUEUED and record.attempts == 0
    assert store.cancel_queued("run_a")
    assert not store.cancel_queued("run_a")
    record = store.get_run("run_a")
    assert record is not None and record.status == RunStatus.CANCELLED


def test_list_is_newest_first(store: RunStore) -> None:
    for i in range(5):
        store.insert_run(new_run(f"run_{i}"))
    assert [r.id for r in store.list_runs(limit=3)] == ["run_4", "run_3", "run_2"]
