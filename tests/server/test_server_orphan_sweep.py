"""The start-up sweep of take files: real files in a real takes folder, a real run store.

Files no stored take references are removed once their run is finished (or was ended by recovery
after its retries); files of runs that will run again, recorded takes, and anything that is not a
take file are left alone. Temp files of interrupted writes go too.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from contextlib import closing
from pathlib import Path

import httpx
import pytest
from server_support import LiveServer, slow_graph, wait_until
from store_support import claim, lease, open_store

from inline_core.config import Config
from inline_core.media import MediaKind
from inline_core.runtime.file_store import FileTakeStore, take_id_for
from inline_core.server.bootstrap import build_services
from inline_core.server.orphan_sweep import sweep_orphan_takes
from inline_core.server.run_state import NewRun, NodeState, RunRecord, RunStatus
from inline_core.server.stores.run_store import RunStore

GRAPH = {"schemaVersion": 1, "nodes": [{"id": "p", "type": "input/text"}, {"id": "s"}]}


def add_run(store: RunStore, run_id: str) -> None:
    """Store a queued run (claimed by the next `started`)."""
    store.insert_run(
        NewRun(
            id=run_id,
            target="s",
            graph=GRAPH,
            request_hash=run_id,
            client_run_id=None,
            node_ids=("p", "s"),
            created_at=time.time(),
        )
    )


def take_file(takes: FileTakeStore, run_id: str, node_id: str = "s", index: int = 0) -> Path:
    path = takes.path_for(take_id_for(run_id, node_id, index), ".png")
    path.write_bytes(b"bytes of " + run_id.encode())
    return path


def started(store: RunStore, run_id: str) -> RunRecord:
    """Store `run_id` and claim it: it is running."""
    add_run(store, run_id)
    [record] = claim(store, limit=1)
    assert record.id == run_id
    return record


def test_only_unreferenced_files_of_finished_runs_are_removed(
    tmp_path: Path, store: RunStore, caplog: pytest.LogCaptureFixture
) -> None:
    takes = FileTakeStore(tmp_path / "takes")
    nodes = {"p": NodeState(), "s": NodeState()}
    # done, its take recorded: kept
    done = started(store, "run_done")
    recorded = takes.write(
        run_id="run_done",
        node_id="s",
        index=0,
        kind=MediaKind.IMAGE,
        data=b"png",
        suffix=".png",
        params={},
    )
    store.finish_future(
        lease(done), 1, RunStatus.DONE, nodes=nodes, fraction=1.0, takes=[recorded]
    ).result()
    # done, but a second file was written and never recorded (killed between write and commit
    # of an earlier attempt that wrote more): removed
    stray = take_file(takes, "run_done", index=1)
    # failed after writing a take: the error was recorded without it: removed
    failing = started(store, "run_failed")
    store.finish_future(lease(failing), 1, RunStatus.ERROR, nodes=nodes, fraction=0.5).result()
    failed = take_file(takes, "run_failed")
    # killed while running, tried once: runs again, so its file stays
    started(store, "run_retry")
    retry = take_file(takes, "run_retry")
    # killed while running on its second attempt: recovery ends it (max_retries=1)
    first_attempt = started(store, "run_spent")
    store.requeue_future(lease(first_attempt), nodes=nodes, refund_attempt=False).result()
    [second_attempt] = claim(store, limit=1)
    assert second_attempt.attempts == 2
    spent = take_file(takes, "run_spent")
    # still queued: its upstream node's file is kept too
    add_run(store, "run_queued")
    queued = take_file(takes, "run_queued", node_id="p")
    # never ours: other names, a folder and a link named like a take
    notes = takes.root / "notes.txt"
    notes.write_text("mine")
    folder = takes.root / take_id_for("run_failed", "s", 2)
    folder.mkdir()
    link = takes.root / (take_id_for("run_failed", "s", 3) + ".png")
    os.symlink(notes, link)

    rerun = store.recover_on_start(max_retries=1, holder=None)
    assert sorted(r.id for r in rerun) == ["run_queued", "run_retry"]
    with caplog.at_level(logging.INFO, logger="inline_core.server.orphan_sweep"):
        report = sweep_orphan_takes(takes.root, store, rerun)

    assert not stray.exists() and not failed.exists() and not spent.exists()
    assert Path(recorded.path).read_bytes() == b"png"
    assert retry.exists() and queued.exists()
    assert notes.exists() and folder.is_dir() and link.is_symlink()
    assert (report.removed, report.kept_for_rerun) == (3, 2)
    assert report.freed_bytes == sum(
        len(b"bytes of " + r.encode()) for r in ("run_done", "run_failed", "run_spent")
    )
    assert stray.name in caplog.text and failed.name in caplog.text
    assert "removed 3 orphan take files" in caplog.text
    # Nothing left to do the second time.
    assert sweep_orphan_takes(takes.root, store, rerun).removed == 0


def test_in_a_shared_takes_folder_files_being_written_are_left_alone(
    tmp_path: Path, store: RunStore
) -> None:
    takes = FileTakeStore(tmp_path / "takes")
    nodes = {"p": NodeState(), "s": NodeState()}
    ended = started(store, "run_failed")
    store.finish_future(lease(ended), 1, RunStatus.ERROR, nodes=nodes, fraction=0.5).result()
    old = take_file(takes, "run_failed", index=0)
    an_hour_ago = time.time() - 3600
    os.utime(old, (an_hour_ago, an_hour_ago))
    # Another server is writing this one right now (say, a run submitted after the sweep read
    # the store); its file is young.
    young = take_file(takes, "run_failed", index=1)

    report = sweep_orphan_takes(takes.root, store, [], min_age_s=600)

    assert not old.exists() and young.exists()
    assert (report.removed, report.kept_for_rerun) == (1, 1)


def test_start_up_removes_orphans_and_temp_files_before_the_runs_resume(tmp_path: Path) -> None:
    config = Config(
        models_dir=tmp_path / "models",
        data_dir=tmp_path / "data",
        profile="cpu",
        dtype="float32",
        run_workers=1,
        max_retries=0,
    )
    runs = open_store(config.data_dir, None)
    started(runs, "run_killed")  # a kill -9 mid-run, after its take was written
    runs.close()
    takes = FileTakeStore(config.takes_dir)
    orphan = take_file(takes, "run_killed")
    temp = takes.root / ".tmp-abc123.png"
    temp.write_bytes(b"half a png")
    upload = config.assets_dir / ".upload-xyz"
    upload.parent.mkdir(parents=True)
    upload.write_bytes(b"half an upload")

    services = build_services(config)
    services.start()
    try:
        record = services.runs.get_run("run_killed")
        assert record is not None and record.status == RunStatus.ERROR  # out of retries
        assert record.error is not None and record.error["code"] == "interrupted"
        assert not orphan.exists() and not temp.exists() and not upload.exists()
    finally:
        services.close()


def test_kill_9_then_restart_sweeps_what_the_killed_run_left(tmp_path: Path) -> None:
    server = LiveServer(
        data_dir=tmp_path / "data",
        models_dir=tmp_path / "models",
        env={"INLINE_MAX_RETRIES": "0"},
    )
    server.start()
    try:
        done = httpx.post(
            server.base + "/v1/runs", json={"graph": slow_graph(steps=1), "target": "s"}
        )
        done_id = done.json()["runId"]
        kept = wait_until(lambda: finished_take(server, done_id), "the first run's take")
        long = httpx.post(
            server.base + "/v1/runs", json={"graph": slow_graph(steps=100_000), "target": "s"}
        )
        killed_id = long.json()["runId"]
        wait_until(
            lambda: stored_status(server, killed_id) == "running" or None, "the run to start"
        )
        server.kill9()
        # What a kill between writing the take and committing the run leaves behind.
        takes_dir = server.data_dir / "takes"
        orphan = takes_dir / (take_id_for(killed_id, "s", 0) + ".png")
        orphan.write_bytes(b"a take no row will ever reference")
        temp = takes_dir / ".tmp-interrupted.png"
        temp.write_bytes(b"half a take")

        server.start()
        state = httpx.get(f"{server.base}/v1/runs/{killed_id}").json()
        assert state["status"] == "error" and state["error"]["code"] == "interrupted"
        assert not orphan.exists() and not temp.exists()
        assert httpx.get(server.base + kept).status_code == 200  # a recorded take stays
        assert f"removed orphan take file {orphan.name}" in server.log()
    finally:
        server.close()


def finished_take(server: LiveServer, run_id: str) -> str | None:
    state = httpx.get(f"{server.base}/v1/runs/{run_id}").json()
    return str(state["takes"][0]["uri"]) if state["status"] == "done" else None


def stored_status(server: LiveServer, run_id: str) -> str | None:
    with closing(sqlite3.connect(server.data_dir / "runs.db")) as db:
        row = db.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()
    return None if row is None else str(row[0])
