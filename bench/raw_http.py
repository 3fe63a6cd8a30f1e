"""A minimal HTTP/1.1 keep-alive client over a raw asyncio socket, for load generators.

httpx spends about ten times the server's CPU per request; on a 2-core machine shared with the
server, a load generator built on it measures itself. This speaks just enough HTTP for JSON
requests with a Content-Length answer (what the /v1 routes send).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any


class RawHttpConnection:
    def __init__(
        self, port: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self._port = port
        self._reader = reader
        self._writer = writer

    @classmethod
    async def open(cls, port: int) -> RawHttpConnection:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(port, reader, writer)

    async def _reconnect(self) -> None:
        await self.close()
        self._reader, self._writer = await asyncio.open_connection("127.0.0.1", self._port)

    @staticmethod
    def request_bytes(method: str, path: str, body: bytes = b"") -> bytes:
        """The bytes of one request; build it once to send it many times."""
        head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        if body:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        return head.encode() + b"\r\n" + body

    async def send(self, request: bytes) -> tuple[int, bytes]:
        """Send prepared request bytes; return (status, body)."""
        status, _head, body = await self.exchange(request)
        return status, body

    async def exchange(self, request: bytes) -> tuple[int, bytes, bytes]:
        """Send prepared request bytes; return (status, lower-cased head, body).

        The server closes a keep-alive connection left idle past its timeout (uvicorn: 5 s), e.g.
        while its user watches a run. As httpx does, a request that meets such a closed
        connection before any answer byte is sent again on a new one: it was never read.
        """
        if self._reader.at_eof() or self._writer.is_closing():
            await self._reconnect()
        self._writer.write(request)
        try:
            head = await self._reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionResetError) as exc:
            if isinstance(exc, asyncio.IncompleteReadError) and exc.partial:
                raise
            await self._reconnect()
            self._writer.write(request)
            head = await self._reader.readuntil(b"\r\n\r\n")
        head = head.lower()
        status = int(head[9:12])
        length = header(head, b"content-length")
        body = await self._reader.readexactly(int(length)) if length else b""
        return status, head, body

    async def post_json(self, path: str, payload: Any) -> tuple[int, bytes, Any]:
        """POST `payload` as JSON; return (status, lower-cased head, decoded body)."""
        request = self.request_bytes("POST", path, json.dumps(payload).encode())
        status, head, body = await self.exchange(request)
        return status, head, json.loads(body) if body else None

    async def get(self, path: str) -> tuple[int, bytes]:
        return await self.send(self.request_bytes("GET", path))

    async def close(self) -> None:
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except ConnectionError:
            pass


def header(head: bytes, name: bytes) -> str | None:
    """The value of header `name` (lower case) in a lower-cased response head."""
    at = head.find(b"\r\n" + name + b":")
    if at < 0:
        return None
    at += len(name) + 3
    return head[at : head.index(b"\r\n", at)].strip().decode()
