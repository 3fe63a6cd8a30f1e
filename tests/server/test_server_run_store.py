"""The durable run store on its own, on SQLite and on a real PostgreSQL: inserts, idempotency,
terminal commits, recovery, claims, leases and their fencing, the event history, migrations."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
from store_support import SERVER, append, claim, lease, new_run, open_store, take

from inline_core.errors import Conflict
from inline_core.server import serialize
from inline_core.server.events import WireEvent
from inline_core.server.run_state import NodeState, NodeStatus, RunStatus
from inline_core.server.stores.records import (
    EVENTS,
    QUEUED,
    ClaimRequest,
    JournalEntry,
    RunMirror,
)
from inline_core.server.stores.run_store import LeaseLost, RunStore
from inline_core.server.stores.sql import Db
from inline_core.server.stores.sqlite import SqliteBackend


def progress(run_id: str, step: int) -> WireEvent:
    body = {"type": "progress", "runId": run_id, "nodeId": "t", "step": step}
    return WireEvent("progress", body, "t")


def test_insert_is_durable_and_readable_from_a_new_store(
    tmp_path: Path, database_url: str | None
) -> None:
    store = open_store(tmp_path, database_url)
    record, created = store.insert_run(new_run("run_a", "client-1"))
    assert created and record.status == RunStatus.QUEUED
    assert record.nodes == {"t": NodeState()}
    store.close()
    again = open_store(tmp_path, database_url)
    stored = again.get_run("run_a")
    assert stored is not None
    assert stored.client_run_id == "client-1"
    assert stored.graph["nodes"][0]["type"] == "input/text"
    assert again.find_by_client_run_id("client-1") == stored
    if isinstance(again.backend, SqliteBackend):
        with again.backend.reading() as db:
            assert db.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert again.backend.integrity_check() == "ok"
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
    assert store.stats()["commits"] < 64 + 1  # some inserts shared a commit


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
    def broken(db: Db) -> None:
        db.execute("INSERT INTO runs (id) VALUES ('half a row')")  # violates NOT NULL

    before = store.insert_run_future(new_run("run_before"))
    bad = store._writer.submit(broken)  # pyright: ignore[reportPrivateUsage]
    after = store.insert_run_future(new_run("run_after"))
    with pytest.raises((sqlite3.IntegrityError, psycopg.IntegrityError)):
        bad.result()
    assert before.result()[1] and after.result()[1]
    assert {r.id for r in store.list_runs()} == {"run_before", "run_after"}


def test_finish_commits_state_takes_and_events_together(store: RunStore) -> None:
    store.insert_run(new_run("run_a"))
    [running] = claim(store)
    assert running.status == RunStatus.RUNNING and running.holder == SERVER
    assert running.attempts == 1
    done = {"t": NodeState(NodeStatus.DONE, 1.0)}
    first = take("run_a", "tk_1")
    ended = serialize.terminal_event(replace(running, status=RunStatus.DONE), [first])
    store.finish_future(
        lease(running),
        running.attempts,
        RunStatus.DONE,
        nodes=done,
        fraction=1.0,
        takes=[first],
        events=[progress("run_a", 1), ended],
    ).result()
    record = store.get_run("run_a")
    assert record is not None
    assert record.status == RunStatus.DONE and record.attempts == 1
    assert record.finished_at is not None and record.nodes == done and record.holder is None
    assert [t.id for t in store.takes_for_run("run_a")] == ["tk_1"]
    assert store.get_take("tk_1") == first
    history = store.events_after("run_a", 0)
    assert [e.type for e in history] == ["run_started", "progress", "run_done"]
    assert all(e.server_id == SERVER and e.attempt == 1 for e in history)
    view = store.view("run_a")
    assert view is not None and view.cursor == history[-1].seq and view.takes == [first]
    # A finished run cannot be finished again, and its take cannot be recorded twice.
    with pytest.raises(LeaseLost):
        store.finish_future(lease(running), 1, RunStatus.ERROR, nodes=done, fraction=1).result()
    assert len(store.all_takes()) == 1


def test_a_take_id_is_recorded_once_even_if_offered_twice(store: RunStore) -> None:
    store.insert_run(new_run("run_a"))
    [running] = claim(store)
    twice = [take("run_a", "tk_same"), take("run_a", "tk_same")]
    store.finish_future(
        lease(running), 1, RunStatus.DONE, nodes={}, fraction=1.0, takes=twice
    ).result()
    assert [t.id for t in store.all_takes()] == ["tk_same"]


def test_recover_on_start(store: RunStore) -> None:
    for run_id in ("run_retry", "run_exhausted", "run_done"):
        store.insert_run(new_run(run_id))
    held = {r.id: r for r in claim(store)}
    store.insert_run(new_run("run_queued"))
    done = held["run_done"]
    store.finish_future(lease(done), 1, RunStatus.DONE, nodes={}, fraction=1.0).result()
    # Pretend run_exhausted already ran (and was interrupted) three times.
    store._writer.submit(  # pyright: ignore[reportPrivateUsage]
        lambda db: db.execute("UPDATE runs SET attempts = 3 WHERE id = 'run_exhausted'")
    ).result()

    queued = store.recover_on_start(max_retries=2, holder=None)

    assert [r.id for r in queued] == ["run_retry", "run_queued"]
    retry = store.get_run("run_retry")
    assert retry is not None and retry.status == RunStatus.QUEUED and retry.attempts == 1
    assert retry.holder is None
    exhausted = store.get_run("run_exhausted")
    assert exhausted is not None and exhausted.status == RunStatus.ERROR
    assert exhausted.error is not None and "interrupted 3 times" in exhausted.error["message"]
    # Its end is in the history, so a client watching it from any server hears of it.
    *_started, ending = store.events_after("run_exhausted", 0)
    assert ending.type == "error" and ending.body["error"]["code"] == "interrupted"
    finished = store.get_run("run_done")
    assert finished is not None and finished.status == RunStatus.DONE


def test_recovery_of_one_server_leaves_the_others_runs_alone(
    tmp_path: Path, database_url: str | None
) -> None:
    a = open_store(tmp_path, database_url, "server-a")
    b = open_store(tmp_path, database_url, "server-b")
    try:
        a.insert_run(new_run("run_1"))
        a.insert_run(new_run("run_2"))
        [of_a] = claim(a, limit=1)
        [of_b] = claim(b, limit=1)
        assert (of_a.id, of_b.id) == ("run_1", "run_2")
        a.recover_on_start(max_retries=2, holder="server-a")  # server-a restarted
        first, second = a.get_run("run_1"), a.get_run("run_2")
        assert first is not None and first.status == RunStatus.QUEUED
        assert second is not None and second.status == RunStatus.RUNNING
        assert second.holder == "server-b"
    finally:
        a.close()
        b.close()


def test_requeue_gives_a_run_back_and_cancel_queued_ends_it(store: RunStore) -> None:
    store.insert_run(new_run("run_a"))
    [running] = claim(store)
    assert store.requeue_future(
        lease(running), nodes={"t": NodeState()}, refund_attempt=True
    ).result()
    record = store.get_run("run_a")
    assert record is not None and record.status == RunStatus.QUEUED and record.attempts == 0
    # The lease is gone with it: writing as its holder again is refused.
    assert not store.requeue_future(lease(running), nodes={}, refund_attempt=True).result()
    assert store.cancel_queued("run_a")
    assert not store.cancel_queued("run_a")
    record = store.get_run("run_a")
    assert record is not None and record.status == RunStatus.CANCELLED
    assert [e.type for e in store.events_after("run_a", 0)] == ["run_started", "cancelled"]


def test_list_is_newest_first_with_queue_positions_and_holders(store: RunStore) -> None:
    for i in range(5):
        store.insert_run(new_run(f"run_{i}"))
    claim(store, limit=1)
    listed = store.list_runs(limit=5)
    assert [r.id for r in listed] == ["run_4", "run_3", "run_2", "run_1", "run_0"]
    assert [r.queue_position for r in listed] == [4, 3, 2, 1, None]
    assert [r.holder for r in listed] == [None, None, None, None, SERVER]
    assert [r.id for r in store.list_runs(limit=2)] == ["run_4", "run_3"]
    assert store.queued_count() == 4


def test_claims_go_in_submit_order_to_servers_that_can_serve_them(store: RunStore) -> None:
    store.insert_run(new_run("run_gpu", needs=("device:cuda", "node:input/text")))
    store.insert_run(new_run("run_model", needs=("model:checkpoints/a.safetensors",)))
    store.insert_run(new_run("run_plain", needs=("node:input/text",)))
    store.insert_run(new_run("run_later", needs=("node:input/text",)))
    cpu = ("device:cpu", "node:input/text")
    # A CPU server without the model takes the plain runs, oldest first, passing the others by.
    assert [r.id for r in claim(store, limit=1, capabilities=cpu)] == ["run_plain"]
    assert [r.id for r in claim(store, limit=5, capabilities=cpu)] == ["run_later"]
    assert claim(store, limit=5, capabilities=cpu) == []
    with_model = (*cpu, "model:checkpoints/a.safetensors")
    assert [r.id for r in claim(store, limit=5, capabilities=with_model)] == ["run_model"]
    gpu = ("device:cuda", "node:input/text")
    assert [r.id for r in claim(store, limit=5, capabilities=gpu)] == ["run_gpu"]


def test_two_servers_claiming_at_once_never_get_the_same_run(
    tmp_path: Path, database_url: str | None
) -> None:
    stores = [open_store(tmp_path, database_url, f"server-{i}") for i in range(2)]
    try:
        for i in range(120):
            stores[0].insert_run(new_run(f"run_{i:03d}"))
        got: dict[str, list[str]] = {s.server_id: [] for s in stores}

        def claimer(store: RunStore) -> None:
            while True:
                claimed = claim(store, limit=3)
                if not claimed:
                    return
                got[store.server_id].extend(r.id for r in claimed)

        threads = [threading.Thread(target=claimer, args=(s,)) for s in stores]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        everything = got["server-0"] + got["server-1"]
        assert sorted(everything) == [f"run_{i:03d}" for i in range(120)]  # each once
        for store in stores:  # and each server got its share in submit order
            assert got[store.server_id] == sorted(got[store.server_id])
        holders = {r.id: r.holder for r in stores[0].list_runs(limit=200)}
        assert all(holders[run_id] == sid for sid, ids in got.items() for run_id in ids)
    finally:
        for store in stores:
            store.close()


def test_a_server_that_lost_its_lease_can_write_nothing_for_the_run(
    tmp_path: Path, database_url: str | None
) -> None:
    a = open_store(tmp_path, database_url, "server-a")
    b = open_store(tmp_path, database_url, "server-b")
    try:
        a.insert_run(new_run("run_a"))
        [first] = claim(a, lease_s=0.2)
        mirror = RunMirror({"t": NodeState(NodeStatus.RUNNING, 0.5)}, 0.5, [])
        assert append(a, lease(first), 1, [progress("run_a", 1)], mirror) == set()
        time.sleep(0.5)  # server-a stops renewing: its lease expires (the database's clock)
        [second] = claim(b, take_over_expired=True)
        assert second.id == "run_a" and second.holder == "server-b" and second.attempts == 2
        assert second.lease_epoch == first.lease_epoch + 1
        # Every write server-a still tries for the run is refused, and changes nothing.
        assert append(a, lease(first), 1, [progress("run_a", 2)], mirror) == {"run_a"}
        with pytest.raises(LeaseLost):
            a.finish_future(
                lease(first), 1, RunStatus.DONE, nodes={}, fraction=1, takes=[take("run_a", "tk")]
            ).result()
        assert not a.requeue_future(lease(first), nodes={}, refund_attempt=False).result()
        renewal = a.heartbeat_future(started_at=0, holding=["run_a"], lease_s=30, info={})
        assert renewal.result().held == {}  # the heartbeat says it is gone
        assert a.all_takes() == []
        assert append(b, lease(second), 2, [progress("run_a", 1)], mirror) == set()
        history = [(e.type, e.server_id, e.attempt) for e in a.events_after("run_a", 0)]
        assert history == [
            ("run_started", "server-a", 1),  # the claim says so in the history
            ("progress", "server-a", 1),
            ("run_started", "server-b", 2),
            ("progress", "server-b", 2),
        ]
        record = a.get_run("run_a")
        assert record is not None and record.status == RunStatus.RUNNING
        assert record.holder == "server-b"
    finally:
        a.close()
        b.close()


def test_expired_leases_are_taken_over_until_no_retries_are_left(store: RunStore) -> None:
    store.insert_run(new_run("run_a"))
    for attempt in (1, 2, 3):
        [held] = claim(store, lease_s=0.1, take_over_expired=True, max_retries=2)
        assert held.attempts == attempt
        time.sleep(0.3)
    # Tried three times, interrupted each time: with two retries allowed, it ends.
    assert claim(store, take_over_expired=True, max_retries=2) == []
    record = store.get_run("run_a")
    assert record is not None and record.status == RunStatus.ERROR
    assert record.error is not None and record.error["code"] == "interrupted"


def test_a_heartbeat_renews_held_leases_lists_servers_and_carries_cancel_requests(
    tmp_path: Path, database_url: str | None
) -> None:
    a = open_store(tmp_path, database_url, "server-a")
    b = open_store(tmp_path, database_url, "server-b")
    try:
        for i in range(3):
            a.insert_run(new_run(f"run_{i}"))
        held = {r.id: r for r in claim(a, lease_s=0.3)}
        b.heartbeat_future(started_at=1.0, holding=[], lease_s=30, info={}).result()
        assert b.request_cancel("run_1") == "server-a"
        assert b.request_cancel("run_nope") is None
        renewal = a.heartbeat_future(
            started_at=2.0, holding=["run_0", "run_1"], lease_s=30, info={"workers": 2}
        ).result()
        assert renewal.held == {"run_0": held["run_0"].lease_epoch, "run_1": 1}
        assert renewal.cancel_requested == frozenset({"run_1"})
        assert [(s.id, s.leases) for s in renewal.servers] == [("server-a", 2), ("server-b", 0)]
        time.sleep(0.5)
        # run_2 was not renewed: its lease expired and another server takes it over.
        [taken] = claim(b, take_over_expired=True)
        assert taken.id == "run_2"
        assert {r.id for r in claim(b, take_over_expired=True)} == set()
    finally:
        a.close()
        b.close()


def test_a_runs_progress_extends_its_lease_and_only_while_it_is_held(
    tmp_path: Path, database_url: str | None
) -> None:
    a = open_store(tmp_path, database_url, "server-a")
    b = open_store(tmp_path, database_url, "server-b")
    try:
        for run_id in ("run_a", "run_b"):
            a.insert_run(new_run(run_id))
        held = {r.id: r for r in claim(a, lease_s=0.3)}
        mirror = RunMirror({}, 0.5, [])

        def write(run_id: str) -> frozenset[str]:
            entry = JournalEntry(lease(held[run_id]), 1, [progress(run_id, 1)], mirror)
            return a.append_events_future(lambda: [entry], lease_s=30).result()

        # No heartbeat: run_a's progress alone keeps it past its 0.3 s lease; run_b, which
        # makes none, is taken over.
        for _ in range(4):
            assert write("run_a") == set()
            time.sleep(0.2)
        assert [r.id for r in claim(b, take_over_expired=True)] == ["run_b"]
        # A write for a run another server took changes nothing, its lease included.
        assert write("run_b") == {"run_b"}
        record = a.get_run("run_b")
        assert record is not None and record.holder == "server-b"
        kept = a.get_run("run_a")
        assert kept is not None and kept.status == RunStatus.RUNNING
        assert (kept.holder, kept.lease_epoch) == ("server-a", held["run_a"].lease_epoch)
    finally:
        a.close()
        b.close()


def test_a_shared_store_claim_takes_its_share_and_counts_earlier_holders(
    tmp_path: Path, database_url: str | None
) -> None:
    if database_url is None:
        pytest.skip("one server per SQLite store: there is nobody to share with")
    a = open_store(tmp_path, database_url, "server-a")
    b = open_store(tmp_path, database_url, "server-b")
    try:
        for i in range(5):
            a.insert_run(new_run(f"run_{i}"))
        for store in (a, b):
            store.heartbeat_future(started_at=1.0, holding=[], lease_s=30, info={}).result()
        # Two servers alive, five runs: a takes three (rounded up), not all it has room for.
        mine = claim(a, 16, lease_s=0.3, take_over_expired=True)
        assert [r.id for r in mine] == ["run_0", "run_1", "run_2"]
        assert claim(a, 16, take_over_expired=True) == []  # its share is taken
        assert [r.id for r in claim(b, 16, take_over_expired=True)] == ["run_3", "run_4"]
        time.sleep(0.5)
        # a's leases lapsed: they are queued again, and b (running two) takes one: its share of
        # five among two. That run had been started once before.
        request = ClaimRequest(
            server_id="server-b",
            limit=16,
            capabilities=(),
            holding=("run_3", "run_4"),
            lease_s=30.0,
            max_retries=2,
            take_over_expired=True,
        )
        claimed = b.claim_future(lambda: request).result()
        assert claimed is not None and claimed.requeued == ["run_0", "run_1", "run_2"]
        assert [r.id for r in claimed.runs] == ["run_0"]
        assert claimed.ran_before == {"run_0": 1}
    finally:
        a.close()
        b.close()


def test_notices_reach_this_process_and_other_servers(
    tmp_path: Path, database_url: str | None
) -> None:
    a = open_store(tmp_path, database_url, "server-a")
    b = open_store(tmp_path, database_url, "server-b") if database_url else a
    heard: dict[str, list[tuple[str, str]]] = {"a": [], "b": []}
    lock = threading.Lock()

    def listener(name: str) -> Callable[[str, str], None]:
        def on_notice(channel: str, payload: str) -> None:
            with lock:
                heard[name].append((channel, payload))

        return on_notice

    a.on_notice = listener("a")
    if b is not a:
        b.on_notice = listener("b")

    def wait_for(who: str, wanted: list[tuple[str, str]]) -> None:
        def heard_all() -> bool:
            with lock:
                return all(w in heard[who] for w in wanted)

        deadline = time.monotonic() + 30
        while not heard_all() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert heard_all(), heard

    try:
        if b is not a:  # server-b listens (its first connection says "look again" to itself)
            wait_for("b", [(EVENTS, "*")])
        a.insert_run(new_run("run_a"))
        [held] = claim(a)
        append(a, lease(held), 1, [progress("run_a", 1)])
        for name in ("a", "b") if b is not a else ("a",):
            wait_for(name, [(QUEUED, "server-a"), (EVENTS, "run_a")])  # the submitter named
    finally:
        a.close()
        if b is not a:
            b.close()
