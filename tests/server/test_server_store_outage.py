"""The PostgreSQL store when its database goes away and comes back (a real server, stopped and
started again): impatient writes fail at once with 503, a run's writes wait and then commit."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from store_support import claim, lease, new_run, open_store

from inline_core.errors import Unavailable
from inline_core.server.events import WireEvent
from inline_core.server.run_state import NodeState, NodeStatus, RunStatus
from inline_core.server.stores.records import JournalEntry, RunMirror
from inline_core.server.stores.run_store import RunStore
from tests.postgres_cluster import PostgresCluster


@pytest.fixture
def store(tmp_path: Path, own_postgres: PostgresCluster) -> Iterator[RunStore]:
    s = open_store(tmp_path, own_postgres.new_database())
    yield s
    s.close()


def test_an_outage_refuses_submissions_and_holds_a_runs_end_until_the_database_returns(
    store: RunStore, own_postgres: PostgresCluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    store.insert_run(new_run("run_a"))
    [held] = claim(store)

    own_postgres.stop("immediate")  # as a crash of the database would
    with pytest.raises(Unavailable) as refused:
        store.insert_run(new_run("run_b"))
    assert "cannot be reached" in refused.value.message
    with pytest.raises(Unavailable):  # reads say so too, rather than hang
        store.get_run("run_a")
    assert not store.reachable

    # The run finishes while the database is away: its end waits for it.
    ending = WireEvent("run_done", {"type": "run_done", "runId": "run_a"})
    done = {"t": NodeState(NodeStatus.DONE, 1.0)}
    finished = store.finish_future(
        lease(held), 1, RunStatus.DONE, nodes=done, fraction=1.0, events=[ending]
    )
    later = threading.Timer(1.5, own_postgres.start)
    later.start()
    finished.result(timeout=60)
    later.join()

    record = store.get_run("run_a")
    assert record is not None and record.status == RunStatus.DONE
    assert [e.type for e in store.events_after("run_a", 0)] == ["run_started", "run_done"]
    assert store.reachable and store.stats()["outages"] == 1
    assert store.get_run("run_b") is None  # refused means not stored
    store.insert_run(new_run("run_b"))  # and submissions are taken again
    messages = [r.getMessage() for r in caplog.records]
    assert any("is unreachable" in m and "submissions answer 503" in m for m in messages)
    assert any("reachable again" in m for m in messages)


def test_a_patient_write_gives_up_after_its_bound(
    tmp_path: Path, own_postgres: PostgresCluster
) -> None:
    url = own_postgres.new_database()
    store = open_store(tmp_path, url)
    store.retry_s = 1.0
    try:
        store.insert_run(new_run("run_a"))
        [held] = claim(store)
        own_postgres.stop("immediate")
        mirror = RunMirror({}, 0.0, [])
        progress = WireEvent("progress", {"type": "progress", "nodeId": "t"}, "t")
        entry = JournalEntry(lease(held), 1, [progress], mirror)
        waiting = store.append_events_future(lambda: [entry])
        with pytest.raises(Unavailable):
            waiting.result(timeout=30)  # bounded: it does not hang past its patience
    finally:
        store.close()


def test_a_session_left_idle_in_a_transaction_is_ended_by_the_database(
    postgres_cluster: PostgresCluster,
) -> None:
    """A server frozen mid-transaction must not keep its rows locked (claims skip locked rows):
    every session the store opens, the writer's and the reads', has the database end it."""
    from inline_core.server.stores.postgres import PostgresBackend

    backend = PostgresBackend(postgres_cluster.new_database(), "frozen-check", wait_s=10)
    try:
        writer = backend.connect()
        try:
            [row] = writer.execute("SHOW idle_in_transaction_session_timeout").fetchall()
            assert list(row.values()) == ["10s"]
        finally:
            writer.close()
        with backend.reading() as db:
            [row] = db.execute("SHOW idle_in_transaction_session_timeout").fetchall()
            assert list(row.values()) == ["10s"]
    finally:
        backend.close()
