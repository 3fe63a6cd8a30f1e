"""A test server whose free port another process takes before it binds it is launched again on
another port: the suite does not depend on what else listens on the machine."""

from __future__ import annotations

import socket
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
