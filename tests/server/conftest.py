from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # the test plugin and helpers live next to this file
    sys.path.insert(0, str(HERE))

from server_support import PLUGIN  # noqa: E402
from store_support import open_store  # noqa: E402

from inline_core.config import Config  # noqa: E402
from inline_core.server.app import create_app  # noqa: E402
from inline_core.server.stores.run_store import RunStore  # noqa: E402


@pytest.fixture
def store(tmp_path: Path, database_url: str | None) -> Iterator[RunStore]:
    """A run store of its own, once on SQLite and once on PostgreSQL."""
    runs = open_store(tmp_path, database_url)
    yield runs
    runs.close()


@pytest.fixture
def config(tmp_path: Path, database_url: str | None) -> Config:
    """A server's configuration, once with the SQLite store and once with PostgreSQL."""
    return Config(
        models_dir=tmp_path / "models",
        data_dir=tmp_path / "data",
        database_url=database_url,
        profile="cpu",
        dtype="float32",
        plugins=(PLUGIN,),
        run_workers=2,
        min_free_disk_mb=0,  # upload tests must not depend on the test machine's free space
    )


@pytest.fixture
def client(config: Config) -> Iterator[TestClient]:
    with TestClient(create_app(config)) as c:
        yield c
