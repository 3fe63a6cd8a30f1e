"""Who may connect: the API token gate.

With `config.api_token` set, every `/v1` route and the websocket need the token, as
`Authorization: Bearer <token>` or `?token=<token>` (for clients that cannot set headers, such as a
browser's WebSocket). `GET /v1/health` stays open so a launcher can wait for readiness, and the
static frontend stays open so a browser can load the app that then asks for the token.
"""

from __future__ import annotations

import hmac
import json
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from inline_core.errors import Unauthorized

OPEN_HTTP = frozenset({("GET", "/v1/health"), ("HEAD", "/v1/health")})


def _presented_token(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            scheme, _, credentials = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer":
                return credentials.strip()
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    tokens = query.get("token")
    return tokens[0] if tokens else None


def _guarded(scope: Scope) -> bool:
    path: str = scope["path"]
    if not (path == "/v1" or path.startswith("/v1/")):
        return False
    if scope["type"] == "http" and (scope["method"], path) in OPEN_HTTP:
        return False
    return True


async def deny(scope: Scope, receive: Receive, send: Send, error: Unauthorized) -> None:
    """Answer with the error envelope: an HTTP response, or for a websocket a denial response
    (a close before the handshake where the server cannot send one)."""
    body = json.dumps(error.to_json()).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"www-authenticate", b'Bearer realm="inline-core"'),
    ]
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": error.status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return
    message: Message = await receive()  # websocket.connect
    if message["type"] != "websocket.connect":
        return
    if "websocket.http.response" in scope.get("extensions", {}):
        await send(
            {"type": "websocket.http.response.start", "status": error.status, "headers": headers}
        )
        await send({"type": "websocket.http.response.body", "body": body})
    else:
        await send({"type": "websocket.close", "code": 4401, "reason": error.message})


class TokenGate:
    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or not _guarded(scope):
            await self.app(scope, receive, send)
            return
        presented = _presented_token(scope)
        if presented is not None and hmac.compare_digest(presented.encode(), self._token):
            await self.app(scope, receive, send)
            return
        reason = "an API token is required" if presented is None else "the API token is wrong"
        await deny(scope, receive, send, Unauthorized(reason))
