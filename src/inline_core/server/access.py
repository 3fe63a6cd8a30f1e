"""Who may connect: the API token gate, and the web-page guards of a server without a token.

With `config.api_token` set, every `/v1` route, ComfyUI's API routes and the websockets need the
token, as `Authorization: Bearer <token>` or `?token=<token>` (for clients that cannot set headers,
such as a browser's WebSocket), or the `inline_token` cookie. A page opened once with
`?token=<token>` (the web UI's link) gets that cookie (HttpOnly, SameSite=Strict) and is sent on
without the token in its address, so the frontend's own requests carry it. `GET /v1/health` stays
open so a launcher can wait for readiness, and the static frontend stays open so a browser can load
the app that then asks for the token.

Without a token, a web page the user happens to visit could still reach a server on loopback. Two
guards stop it (a token replaces both):
- `OriginGate`: a request carrying a browser `Origin` that is neither a configured CORS origin nor
  the server's own origin is refused (403). Browsers do not apply CORS to websockets, and some
  cross-origin POSTs need no preflight, so CORS alone does not stop a page from acting.
- `LoopbackHostGate` (installed by the launcher): a `Host` header that is not a loopback name is
  refused (403), so a DNS-rebinding page (its own domain resolved to 127.0.0.1) gets nowhere.
"""

from __future__ import annotations

import hmac
import json
from http.cookies import SimpleCookie
from urllib.parse import parse_qs, urlencode

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from inline_core.errors import InlineError, Unauthorized
from inline_core.server.comfy.paths import is_comfy_api

OPEN_HTTP = frozenset({("GET", "/v1/health"), ("HEAD", "/v1/health")})
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
TOKEN_COOKIE = "inline_token"


class Forbidden(InlineError):
    code = "forbidden"
    status = 403


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin-1")
    return None


def host_name(host: str) -> str:
    """The name part of a Host header (`[::1]:8848` -> `::1`), lower-cased."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host


def _presented_token(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            scheme, _, credentials = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer":
                return credentials.strip()
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    tokens = query.get("token")
    if tokens:
        return tokens[0]
    cookie = _header(scope, b"cookie")
    if cookie:
        jar = SimpleCookie()
        try:
            jar.load(cookie)
        except Exception:  # a malformed cookie header is no token
            return None
        if TOKEN_COOKIE in jar:
            return jar[TOKEN_COOKIE].value
    return None


def _guarded(scope: Scope) -> bool:
    path: str = scope["path"]
    if not (path == "/v1" or path.startswith("/v1/") or is_comfy_api(path)):
        return False
    if scope["type"] == "http" and (scope["method"], path) in OPEN_HTTP:
        return False
    return True


async def deny(scope: Scope, receive: Receive, send: Send, error: InlineError) -> None:
    """Answer with the error envelope: an HTTP response, or for a websocket a denial response
    (a close before the handshake where the server cannot send one)."""
    body = json.dumps(error.to_json()).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    if isinstance(error, Unauthorized):
        headers.append((b"www-authenticate", b'Bearer realm="inline-core"'))
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
        code = 4000 + error.status
        await send({"type": "websocket.close", "code": code, "reason": error.message[:120]})


class TokenGate:
    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not _guarded(scope) and scope["method"] == "GET":
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            if "token" in query:  # the web UI's link: set the cookie, drop the token from the URL
                await self._token_link(scope, receive, send, query)
                return
        if scope["type"] not in ("http", "websocket") or not _guarded(scope):
            await self.app(scope, receive, send)
            return
        presented = _presented_token(scope)
        if presented is not None and hmac.compare_digest(presented.encode(), self._token):
            await self.app(scope, receive, send)
            return
        reason = "an API token is required" if presented is None else "the API token is wrong"
        await deny(scope, receive, send, Unauthorized(reason))

    async def _token_link(
        self, scope: Scope, receive: Receive, send: Send, query: dict[str, list[str]]
    ) -> None:
        given = query["token"][0].encode()
        if not hmac.compare_digest(given, self._token):
            await deny(scope, receive, send, Unauthorized("the API token is wrong"))
            return
        rest = urlencode([(k, v) for k, vs in query.items() if k != "token" for v in vs])
        location = scope["path"] + (f"?{rest}" if rest else "")
        cookie = f"{TOKEN_COOKIE}={given.decode()}; Path=/; HttpOnly; SameSite=Strict"
        headers = [
            (b"location", location.encode("latin-1")),
            (b"set-cookie", cookie.encode("latin-1")),
            (b"cache-control", b"no-store"),
            (b"content-length", b"0"),
        ]
        await send({"type": "http.response.start", "status": 303, "headers": headers})
        await send({"type": "http.response.body", "body": b""})


class OriginGate:
    """Refuse (403) an API request from a web page whose origin was not allowed."""

    def __init__(self, app: ASGIApp, allowed: tuple[str, ...]) -> None:
        self.app = app
        self._allowed = frozenset(o.rstrip("/").lower() for o in allowed)

    def _allows(self, scope: Scope) -> bool:
        origin = _header(scope, b"origin")
        if origin is None:
            return True  # not a browser page: curl, the desktop app's native client, scripts
        origin = origin.strip().rstrip("/").lower()
        if origin in self._allowed:
            return True
        host = _header(scope, b"host")
        # The server's own pages (a frontend served with --front-end-root) are same-origin.
        _scheme, sep, authority = origin.partition("://")
        return bool(sep) and host is not None and authority == host.strip().lower()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or not _guarded(scope) or self._allows(scope):
            await self.app(scope, receive, send)
            return
        origin = (_header(scope, b"origin") or "")[:200]
        error = Forbidden(
            f"requests from the web origin {origin!r} are not allowed; start the server with "
            "--cors-origin for it (or set an API token)"
        )
        await deny(scope, receive, send, error)


class LoopbackHostGate:
    """Refuse (403) any request whose Host header is not a loopback name."""

    def __init__(self, app: ASGIApp, extra_names: tuple[str, ...] = ()) -> None:
        self.app = app
        self._names = LOOPBACK_NAMES | {host_name(n) for n in extra_names}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        host = _header(scope, b"host")
        if host is None or host_name(host).rstrip(".") in self._names:
            await self.app(scope, receive, send)
            return
        error = Forbidden(
            f"this server answers on loopback names only, not {host[:200]!r}; set an API token "
            "to reach it under another name"
        )
        await deny(scope, receive, send, error)
