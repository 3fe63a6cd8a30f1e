"""Every error as the envelope `{"error": {"code", "message", "nodeId"?}}` with its status.

`InlineError`s carry their own code and status; Starlette's 404/405 and request validation map onto
codes here; anything else is logged and answered `500 internal` with no traceback.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from inline_core.errors import Busy, InlineError, RangeNotSatisfiable, Unavailable
from inline_core.server.http_io import json_response
from inline_core.server.serialize import error_envelope

log = logging.getLogger(__name__)

_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "busy",
}
# A 503 (shutting down, restarting) tells the client when to come back.
UNAVAILABLE_RETRY_S = 5
# Messages can quote client input; an answer never grows with it.
MAX_MESSAGE_CHARS = 2000


def clip_message(message: str) -> str:
    if len(message) <= MAX_MESSAGE_CHARS:
        return message
    return message[:MAX_MESSAGE_CHARS] + f"... ({len(message) - MAX_MESSAGE_CHARS} more characters)"


def inline_error_response(exc: InlineError) -> Response:
    headers: dict[str, str] = {}
    if isinstance(exc, Busy):
        headers["Retry-After"] = str(exc.retry_after_s)
    if isinstance(exc, Unavailable):
        headers["Retry-After"] = str(UNAVAILABLE_RETRY_S)
    if isinstance(exc, RangeNotSatisfiable):
        headers["Content-Range"] = f"bytes */{exc.size}"
    body = error_envelope(exc.code, clip_message(exc.message), exc.node_id)
    return json_response(body, exc.status, headers)


async def _inline_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, InlineError)
    return inline_error_response(exc)


async def _http_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = _HTTP_CODES.get(exc.status_code, f"http_{exc.status_code}")
    message = exc.detail or code.replace("_", " ")
    if exc.status_code == 404:
        message = "no such route"
    return json_response(error_envelope(code, message), exc.status_code, exc.headers)


async def _validation_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    problems = "; ".join(
        f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', 'invalid')}"
        for e in exc.errors()
    )
    return json_response(error_envelope("invalid_request", problems or "invalid request"), 422)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(InlineError, _inline_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)


class InternalErrors:
    """Catches what no handler did: logs it and answers 500 `internal` (never a traceback)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            if message["type"] in ("http.response.start", "websocket.accept"):
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except ClientDisconnect:
            return  # the client left mid-body: there is nobody to answer
        except Exception:
            log.exception("unhandled error on %s %s", scope.get("method", "WS"), scope["path"])
            if started:
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1011, "reason": "internal"})
                    return
                raise  # the response is half sent; only dropping the connection is honest
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1011, "reason": "internal"})
                return
            response = json_response(
                error_envelope("internal", "the server hit an unexpected error"), 500
            )
            await response(scope, receive, send)
