"""Versioned schema migrations, on both backends: an old database upgrades in place, a newer one
is refused, and a server started against it says why and exits."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from server_support import HERE, PLUGIN, SRC, run_until_it_exits
from store_support import claim, open_store

from inline_core.config import Config
from inline_core.server.run_state import RunStatus
from inline_core.server.stores.migrations import LATEST, SchemaTooNew, migrate
from inline_core.server.stores.sqlite import SqliteBackend


def test_a_first_release_database_upgrades_in_place_and_keeps_its_runs(tmp_path: Path) -> None:
    # runs.db as the first release left it: schema version 1, one run waiting.
    backend = SqliteBackend(tmp_path / "runs.db")
    db = backend.connect()
    assert migrate(db, up_to=1) == (0, 1)
    graph = {"schemaVersion": 1, "nodes": [{"id": "t", "type": "input/text"}]}
    db.begin()
    db.execute(
        "INSERT INTO runs (id, request_hash, graph, target, status, created_at, nodes) "
        "VALUES ('run_old', 'h', ?, 't', 'queued', ?, ?)",
        (json.dumps(graph), time.time(), json.dumps({"t": {"state": "queued"}})),
    )
    db.commit()
    db.close()

    store = open_store(tmp_path, None)
    try:
        assert store.schema_version == LATEST
        old = store.get_run("run_old")
        assert old is not None and old.status == RunStatus.QUEUED and old.graph == graph
        [claimed] = claim(store)  # the new columns have their defaults: it is claimable
        assert claimed.id == "run_old" and claimed.attempts == 1
    finally:
        store.close()


def _bump_version(store_dir: Path, database_url: str | None) -> None:
    store = open_store(store_dir, database_url)
    try:
        writes = store.backend.dialect.write_version
        store._writer.submit(  # pyright: ignore[reportPrivateUsage]
            lambda db: [db.execute(s.format(version=LATEST + 1)) for s in writes]
        ).result()
    finally:
        store.close()


def test_a_schema_newer_than_this_code_is_refused(tmp_path: Path, database_url: str | None) -> None:
    _bump_version(tmp_path, database_url)
    with pytest.raises(SchemaTooNew) as refused:
        open_store(tmp_path, database_url)
    assert f"version {LATEST + 1}" in refused.value.message
    assert f"up to {LATEST}" in refused.value.message


def test_a_server_started_on_a_newer_schema_exits_saying_why(
    tmp_path: Path, database_url: str | None
) -> None:
    config = Config(data_dir=tmp_path / "data", database_url=database_url)
    _bump_version(config.data_dir, database_url)
    env = {
        **os.environ,
        "INLINE_DATA_DIR": str(config.data_dir),
        "INLINE_MODELS_DIR": str(tmp_path / "models"),
        "INLINE_PROFILE": "cpu",
        "INLINE_PLUGINS": PLUGIN,
        "PYTHONPATH": f"{SRC}:{HERE}",
        **({"INLINE_DATABASE_URL": database_url} if database_url else {}),
    }
    # It binds before it reads the store: on a free port, never 8848.
    done = run_until_it_exits([sys.executable, "-m", "inline_core.server"], env, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "newer than this Inline Core knows" in done.stderr
    assert "Traceback" not in done.stderr
