"""Local IPC that only the server's own group can use.

The server listens on a Unix domain socket inside a private (0700) temporary directory, and every
connection must pass `multiprocessing`'s HMAC challenge with a random per-group key in both
directions. The socket path and the key reach the ranks through their environment, never argv.
"""

from __future__ import annotations

import os
import secrets
import select
import shutil
import socket
import tempfile
import threading
from multiprocessing.connection import Client, Connection, answer_challenge, deliver_challenge

from inline_core.parallel.protocol import Message, decode, encode

SOCKET_ENV = "INLINE_PARALLEL_SOCKET"
AUTHKEY_ENV = "INLINE_PARALLEL_AUTHKEY"


class Channel:
    """One authenticated connection. Any thread may send; exactly one thread receives."""

    def __init__(self, conn: Connection[bytes, bytes]) -> None:
        self._conn = conn
        self._send_lock = threading.Lock()
        self._closed = False

    def send(self, message: Message) -> None:
        frame = encode(message)
        with self._send_lock:
            self._conn.send_bytes(frame)

    def recv(self, timeout: float | None = None) -> Message | None:
        """The next message; None if `timeout` passed first. Raises EOFError/OSError on close."""
        if timeout is not None and not self._conn.poll(timeout):
            return None
        return decode(self._conn.recv_bytes())

    def wait(self) -> None:
        """Block until bytes arrive (or the connection closes); nothing is consumed."""
        self._conn.poll(None)

    def unread(self) -> bool:
        """Whether bytes have arrived that the receiving thread has not read yet (any thread may
        ask; nothing is consumed). False once closed."""
        if self._closed:
            return False
        try:
            readable, _, _ = select.select([self._conn.fileno()], [], [], 0)
        except (OSError, ValueError):
            return False
        return bool(readable)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._conn.close()


class IpcServer:
    """The listening end, owned by the server process for one group's lifetime."""

    def __init__(self) -> None:
        self.directory = tempfile.mkdtemp(prefix="inline-group-")  # created 0700
        os.chmod(self.directory, 0o700)
        self.address = os.path.join(self.directory, "ipc.sock")
        self.authkey = secrets.token_bytes(32)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(self.address)
        os.chmod(self.address, 0o600)
        self._sock.listen(64)

    def env(self) -> dict[str, str]:
        return {SOCKET_ENV: self.address, AUTHKEY_ENV: self.authkey.hex()}

    def accept(self, timeout: float) -> Channel | None:
        """One authenticated connection, or None when nobody connected within `timeout`.

        Raises `multiprocessing.AuthenticationError` for a peer without the key."""
        readable, _, _ = select.select([self._sock], [], [], timeout)
        if not readable:
            return None
        sock, _ = self._sock.accept()
        conn: Connection[bytes, bytes] = Connection(sock.detach())
        try:
            deliver_challenge(conn, self.authkey)
            answer_challenge(conn, self.authkey)
        except BaseException:
            conn.close()
            raise
        return Channel(conn)

    def close(self) -> None:
        try:
            self._sock.close()
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)


def connect(address: str, authkey: bytes) -> Channel:
    """The worker end: connect and authenticate (mutually) with the server."""
    conn: Connection[bytes, bytes] = Client(address, family="AF_UNIX", authkey=authkey)
    return Channel(conn)


def connect_from_env(env: dict[str, str] | None = None) -> Channel:
    source = dict(os.environ) if env is None else env
    try:
        return connect(source[SOCKET_ENV], bytes.fromhex(source[AUTHKEY_ENV]))
    except KeyError as exc:
        raise RuntimeError(f"{exc.args[0]} is not set: not started by a WorkerGroup") from None
