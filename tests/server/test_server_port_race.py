"""A test server whose free port another process takes before it binds it is launched again on
another port, and one that must refuse is run again until it refuses for its own reason: the
suite does not depend on what else listens on the machine."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import server_support
from server_support import PORT_TAKEN, LiveServer


@pytest.fixture
def busy() -> Iterator[int]:
    """A port this test holds (listening), as another process on the machine would."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield int(taken.getsockname()[1])


@pytest.fixture
def taken_once(busy: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """`free_port` hands out `busy` first, as if another process had bound it between
    `free_port` and the server's bind, then free ports."""
    ports = iter([busy])
    real_free_port = server_support.free_port
    monkeypatch.setattr(server_support, "free_port", lambda: next(ports, None) or real_free_port())
    return busy


def test_a_server_whose_port_was_taken_meanwhile_starts_on_another(
    tmp_path: Path, taken_once: int
) -> None:
    server = LiveServer(tmp_path / "data", tmp_path / "models")
    try:
        server.start()
        assert server.starts == 2 and server.port != taken_once
        assert PORT_TAKEN in (tmp_path / "server-1.log").read_text()
    finally:
        server.close()


def test_a_server_whose_port_is_taken_every_time_fails_after_its_last_launch(
    tmp_path: Path, busy: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every launch's port taken: the start gives up with the last launch's log, launching no
    # server beyond its tries that nobody waits for.
    monkeypatch.setattr(server_support, "free_port", lambda: busy)
    server = LiveServer(tmp_path / "data", tmp_path / "models")
    try:
        with pytest.raises(AssertionError, match=PORT_TAKEN):
            server.start()
        assert server.starts == server_support.PORT_RACE_RETRIES
    finally:
        server.close()


def test_a_refusing_server_whose_port_was_taken_meanwhile_refuses_for_its_own_reason(
    tmp_path: Path, taken_once: int
) -> None:
    # It binds before it opens its store: on the taken port it would say only that.
    with socket.socket() as unused:  # a port nothing listens on: the database is out of reach
        unused.bind(("127.0.0.1", 0))
        nowhere = f"postgresql://inline@127.0.0.1:{unused.getsockname()[1]}/inline"
        env = {
            **os.environ,
            "INLINE_DATA_DIR": str(tmp_path / "data"),
            "INLINE_MODELS_DIR": str(tmp_path / "models"),
            "INLINE_DATABASE_URL": nowhere,
            "INLINE_DATABASE_RETRY_S": "1",
            "PYTHONPATH": str(server_support.SRC),
        }
        done = server_support.run_until_it_exits(
            [sys.executable, "-m", "inline_core.server"], env, timeout=120
        )
    assert done.returncode == 2, done.stderr
    assert "cannot reach the run database" in done.stderr and PORT_TAKEN not in done.stderr
