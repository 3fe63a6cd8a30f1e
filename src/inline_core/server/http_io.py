"""Small HTTP helpers shared by the routes: JSON responses, bounded body reads, ETag matching."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

from starlette.requests import Request
from starlette.responses import Response

from inline_core.errors import InvalidRequest, PayloadTooLarge

MB = 1024 * 1024
# JSON nested deeper than this is refused: nothing in the contract comes close, and unbounded
# nesting would exhaust the recursion of every later walk over the value.
MAX_JSON_DEPTH = 64


def json_response(
    body: Any, status: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    content = json.dumps(body, separators=(",", ":")).encode()
    return Response(content, status, headers=dict(headers or {}), media_type="application/json")


def declared_length(request: Request, limit: int, what: str) -> None:
    """Refuse a body whose Content-Length is over `limit` before reading any of it."""
    raw = request.headers.get("content-length")
    if raw is None:
        return
    try:
        length = int(raw)
    except ValueError:
        raise InvalidRequest("Content-Length is not a number") from None
    if length > limit:
        raise PayloadTooLarge(f"{what} is larger than the {limit // MB} MB limit")


async def read_body(request: Request, limit: int, what: str = "the request body") -> bytes:
    """The whole body, refusing it (413) as soon as it grows past `limit` bytes."""
    declared_length(request, limit, what)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise PayloadTooLarge(f"{what} is larger than the {limit // MB} MB limit")
    return bytes(body)


async def read_json_object(request: Request, limit: int) -> dict[str, Any]:
    raw = await read_body(request, limit)
    try:
        value: object = json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        raise InvalidRequest("the request body is not valid JSON") from None
    except RecursionError:
        raise InvalidRequest(f"the request body nests deeper than {MAX_JSON_DEPTH}") from None
    if not isinstance(value, dict):
        raise InvalidRequest("the request body must be a JSON object")
    body = cast(dict[str, Any], value)  # JSON object keys are always strings
    if json_depth(body) > MAX_JSON_DEPTH:
        raise InvalidRequest(f"the request body nests deeper than {MAX_JSON_DEPTH}")
    return body


def json_depth(value: object) -> int:
    """How deeply containers nest in a parsed JSON value (iteratively: no recursion limit)."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: list[object] = list(cast(dict[str, object], item).values())
        elif isinstance(item, list):
            children = list(cast(list[object], item))
        else:
            continue
        deepest = max(deepest, depth)
        if depth > MAX_JSON_DEPTH:
            return depth  # deep enough to refuse; no need to walk the rest
        stack.extend((child, depth + 1) for child in children)
    return deepest


def quoted(tag: str) -> str:
    return f'"{tag}"'


def etag_matches(request: Request, tag: str) -> bool:
    """Whether If-None-Match names `tag` (quoted or not, weak or strong, or `*`)."""
    header = request.headers.get("if-none-match")
    if header is None:
        return False
    for candidate in header.split(","):
        value = candidate.strip().removeprefix("W/").strip('"')
        if value in (tag, "*"):
            return True
    return False
