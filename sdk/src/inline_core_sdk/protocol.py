"""The server <-> pack worker protocol: length-prefixed JSON frames on a local socket.

A frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON holding one object with a
`type`. Media never rides in a frame (see `media.py`), so frames stay small. Since protocol 2 the
worker is started with an output arena (`arena.py`), and a result's image outputs may name places
in it instead of raw pixel files.

    worker -> server  hello {protocol, sdk, nodes}          once, when it is ready
    server -> worker  call {id, node, params, inputs, out}  one at a time
    worker -> server  progress {id, fraction, step?, total?}
    worker -> server  result {id, outputs} | error {id, message, traceback} | cancelled {id}
    server -> worker  cancel {id}                            the node stops at its next check
    server -> worker  shutdown                               exit cleanly
"""

from __future__ import annotations

import json
import socket
import struct
from typing import Any, cast

MAX_FRAME_BYTES = 16 * 1024 * 1024
_HEADER = struct.Struct(">I")


class ProtocolError(ConnectionError):
    """The other side sent something that is not a frame, or went away."""


def encode_frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message, separators=(",", ":")).encode()
    if len(body) > MAX_FRAME_BYTES:
        raise ProtocolError(f"a {message.get('type')} frame of {len(body)} bytes is too large")
    return _HEADER.pack(len(body)) + body


def send_frame(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(encode_frame(message))


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    chunks: list[bytes] = []
    left = size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ProtocolError("the other side closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(sock: socket.socket) -> dict[str, Any]:
    (size,) = _HEADER.unpack(_read_exactly(sock, _HEADER.size))
    if size > MAX_FRAME_BYTES:
        raise ProtocolError(f"a frame of {size} bytes is over the {MAX_FRAME_BYTES} byte limit")
    try:
        message = json.loads(_read_exactly(sock, size))
    except ValueError as exc:
        raise ProtocolError(f"a frame is not JSON: {exc}") from exc
    if not isinstance(message, dict):
        raise ProtocolError("a frame must be a JSON object")
    frame = cast(dict[str, Any], message)
    if not isinstance(frame.get("type"), str):
        raise ProtocolError("a frame must have a 'type'")
    return frame
