"""Small HTTP helpers shared by the routes: JSON responses, bounded body reads, list limits, ETag
matching."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, cast

from starlette.requests import Request
from starlette.responses import Response

from inline_core.errors import InvalidRequest, PayloadTooLarge, UnsupportedMedia
from inline_core.sizes import human_size

MB = 1024 * 1024
# JSON nested deeper than this is refused: nothing in the contract comes close, and unbounded
# nesting would exhaust the recursion of every later walk over the value.
MAX_JSON_DEPTH = 64
# An error message names at most this many of the client's keys, each cut to a short length, so a
# hostile body cannot make the answer as large as itself.
LISTED_NAMES = 10
NAME_CHARS = 64
# A list route's `?limit=`: how many it answers without one, and the most it takes.
DEFAULT_LIST, MAX_LIST = 50, 500


def clipped_names(names: list[str]) -> str:
    """`names` for an error message: the first few, each shortened, and how many more."""
    shown = [repr(n if len(n) <= NAME_CHARS else n[:NAME_CHARS] + "...") for n in names]
    more = len(shown) - LISTED_NAMES
    listed = ", ".join(shown[:LISTED_NAMES])
    return f"[{listed}, ... {more} more]" if more > 0 else f"[{listed}]"


def json_response(
    body: Any, status: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    content = json.dumps(body, separators=(",", ":")).encode()
    return Response(content, status, headers=dict(headers or {}), media_type="application/json")


def list_limit(request: Request) -> int:
    """A list route's `?limit=` (DEFAULT_LIST without one): a whole number up to MAX_LIST."""
    raw = request.query_params.get("limit")
    if raw is None:
        return DEFAULT_LIST
    limit = whole_number(raw)
    if limit is None or not 1 <= limit <= MAX_LIST:
        raise InvalidRequest(f"'limit' must be a whole number from 1 to {MAX_LIST}")
    return limit


def whole_number(raw: str) -> int | None:
    """A query's whole number: ASCII digits, up to nine (None: not one). `str.isdigit` alone
    passes a superscript `int` refuses, and `int` refuses a number past 4300 digits: each a
    ValueError, a 500."""
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 9 else None


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
        raise PayloadTooLarge(f"{what} is larger than the {human_size(limit)} limit")


async def read_body(request: Request, limit: int, what: str = "the request body") -> bytes:
    """The whole body, refusing it (413) as soon as it grows past `limit` bytes."""
    declared_length(request, limit, what)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise PayloadTooLarge(f"{what} is larger than the {human_size(limit)} limit")
    return bytes(body)


def media_type(request: Request) -> str:
    """The request's Content-Type without parameters, lower-cased ("" when there is none)."""
    return request.headers.get("content-type", "").partition(";")[0].strip().lower()


def require_json(request: Request) -> None:
    """Refuse (415) a body not declared as JSON. Besides catching client mistakes, this stops a web
    page from posting to a local server: a cross-origin POST may carry `text/plain` or a form
    without the browser asking first, but `application/json` needs a CORS preflight."""
    kind = media_type(request)
    if kind != "application/json" and not (
        kind.startswith("application/") and kind.endswith("+json")
    ):
        shown = f"{kind!r}" if kind else "no content type"
        raise UnsupportedMedia(
            f"the body must be JSON sent with Content-Type: application/json (got {shown})"
        )


def _not_json(constant: str) -> object:
    raise ValueError(f"{constant} is not a JSON value")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999 parses as infinity, which no JSON reader can read back
        raise ValueError(f"the number {text[:40]} is out of range")
    return value


def parse_json(raw: bytes | str) -> object:
    """Strict JSON: NaN, Infinity and numbers that overflow to infinity are refused, so whatever
    is stored can be served back as valid JSON."""
    return json.loads(raw, parse_constant=_not_json, parse_float=_finite)


async def read_json_object(request: Request, limit: int) -> dict[str, Any]:
    declared_length(request, limit, "the request body")
    require_json(request)
    return json_object(await read_body(request, limit), "the request body")


def json_object(raw: bytes | str, what: str) -> dict[str, Any]:
    """`raw` parsed as one strict JSON object (`what` names it in the errors: 422)."""
    try:
        value: object = parse_json(raw)
    except (UnicodeDecodeError, ValueError):
        raise InvalidRequest(f"{what} is not valid JSON") from None
    except RecursionError:
        raise InvalidRequest(f"{what} nests deeper than {MAX_JSON_DEPTH}") from None
    if not isinstance(value, dict):
        raise InvalidRequest(f"{what} must be a JSON object")
    body = cast(dict[str, Any], value)  # JSON object keys are always strings
    if json_depth(body) > MAX_JSON_DEPTH:
        raise InvalidRequest(f"{what} nests deeper than {MAX_JSON_DEPTH}")
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
