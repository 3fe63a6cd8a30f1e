"""The listening socket, bound before the server opens its store or recovers anything: a port
that is taken refuses the start while nothing has been touched yet."""

from __future__ import annotations

import errno
import socket

from inline_core.errors import InvalidRequest


def bind_listener(host: str, port: int) -> socket.socket:
    """A bound TCP socket for `host:port` (uvicorn listens on it); a clear refusal if the
    address cannot be had."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise InvalidRequest(f"cannot listen on {host!r}: {exc.strerror}; check --host") from exc
    family, kind, proto, _name, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        # As uvicorn does: a restart may bind while the last process's connections linger.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise InvalidRequest(
                f"cannot listen on {host}:{port}: the port is in use (another server?); "
                "stop it, or pass another --port (INLINE_PORT)"
            ) from exc
        raise InvalidRequest(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; check --host and --port"
        ) from exc
    sock.set_inheritable(False)
    return sock
