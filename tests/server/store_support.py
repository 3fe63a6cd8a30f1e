"""Helpers for tests that use the run store directly, on either backend."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path
from typing import Any, LiteralString, cast

import psycopg

from inline_core.config import Config
from inline_core.media import MediaKind
from inline_core.server.run_state import NewRun, RunRecord
from inline_core.server.stores import open_run_store
from inline_core.server.stores.records import (
    ClaimRequest,
    EventLike,
    JournalEntry,
    Lease,
    RunMirror,
)
from inline_core.server.stores.run_store import RunStore
from inline_core.takes import MediaFacts, Take

SERVER = "server-a"


def open_store(data_dir: Path, database_url: str | None, server_id: str = SERVER) -> RunStore:
    return open_run_store(Config(data_dir=data_dir, database_url=database_url), server_id)


def new_run(
    run_id: str,
    client_run_id: str | None = None,
    request_hash: str = "h1",
    needs: tuple[str, ...] = (),
) -> NewRun:
    return NewRun(
        id=run_id,
        target="t",
        graph={"schemaVersion": 1, "nodes": [{"id": "t", "type": "input/text"}]},
        request_hash=request_hash,
        client_run_id=client_run_id,
        node_ids=("t",),
        created_at=time.time(),
        needs=needs,
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
        path=f"/nowhere/{take_id}.png",
        facts=MediaFacts("image/png", 8, 8),
    )


def claim(
    store: RunStore,
    limit: int = 100,
    *,
    capabilities: tuple[str, ...] = (),
    holding: tuple[str, ...] = (),
    lease_s: float = 30.0,
    max_retries: int = 2,
    take_over_expired: bool = False,
) -> list[RunRecord]:
    """Claim for `store`'s server, as its claimer would."""
    request = ClaimRequest(
        server_id=store.server_id,
        limit=limit,
        capabilities=capabilities,
        holding=holding,
        lease_s=lease_s,
        max_retries=max_retries,
        take_over_expired=take_over_expired,
    )
    claimed = store.claim_future(lambda: request).result()
    assert claimed is not None
    return claimed.runs


def append(
    store: RunStore,
    held: Lease,
    attempt: int,
    events: Sequence[EventLike],
    mirror: RunMirror | None = None,
) -> frozenset[str]:
    """Append one held run's events, as its journal would; returns the runs whose lease was
    lost (nothing written for them)."""
    state = mirror if mirror is not None else RunMirror({}, 0.0, [])
    return store.append_events_future(lambda: [JournalEntry(held, attempt, events, state)]).result()


def lease(record: RunRecord) -> Lease:
    assert record.holder is not None, f"run {record.id} is not held"
    return Lease(record.id, record.holder, record.lease_epoch)


def query(config: Config, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
    """Read the store's tables directly, as another process would (`?` placeholders)."""
    if config.database_url is None:
        with closing(sqlite3.connect(config.runs_db, timeout=30)) as db:
            return db.execute(sql, params).fetchall()
    with psycopg.connect(config.database_url, autocommit=True) as conn:
        statement = cast(LiteralString, sql.replace("?", "%s"))  # the tests' own SQL
        return conn.execute(statement, params).fetchall()
