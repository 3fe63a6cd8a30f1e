"""A test server whose free port another process takes before it binds it is launched again on
another port, and one that must refuse is run again until it refuses for its own reason: the
suite does not depend on what else listens on the machine."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest
import server_support
from server_support import PORT_TAKEN, LiveServer


def test_a_server_whose_port_was_taken_meanwhile_starts_on_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = int(taken.getsockname()[1])
        ports = iter([busy])
        real_free_port = server_support.free_port
        # The first port handed out is the one this test holds, as if another process had
        # bound it between `free_port` and the server's bind.
        monkeypatch.setattr(
            server_support, "free_port", lambda: next(ports, None) or real_free_port()
        )
        server = LiveServer(tmp_path / "data", tmp_path / "models")
        try:
            server.start()
            assert server.starts == 2 and server.port != busy
            assert PORT_TAKEN in (tmp_path / "server-1.log").read_text()
        finally:
            server.close()


def test_a_server_whose_port_is_taken_every_time_fails_after_its_last_launch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every launch's port taken: the start gives up with the last launch's log, launching no
    # server beyond its tries that nobody waits for.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = int(taken.getsockname()[1])
        monkeypatch.setattr(server_support, "free_port", lambda: busy)
        server = LiveServer(tmp_path / "data", tmp_path / "models")
        try:
            with pytest.raises(AssertionError, match=PORT_TAKEN):
                server.start()
            assert server.starts == server_support.PORT_RACE_RETRIES
        finally:
            server.close()


def test_a_refusing_server_whose_port_was_taken_meanwhile_refuses_for_its_own_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # It binds before it opens its store: on the taken port it would say only that.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = int(taken.getsockname()[1])
        ports = iter([busy])
        real_free_port = server_support.free_port
        monkeypatch.setattr(
            server_support, "free_port", lambda: next(ports, None) or real_free_port()
        )
        nowhere = f"postgresql://inline@127.0.0.1:{real_free_port()}/inline"
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
