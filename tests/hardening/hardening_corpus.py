"""The hostile-input corpus: malformed or malicious requests and the answer each must get.

Every entry is one request (HTTP or websocket handshake) with the status and error code it must be
answered with; the answer must be the `{"error": {code, message}}` envelope. Paths may name
`{take}` (a real take) and `{run}` (a finished run), filled in by the test.

Clients: "open" is a server without a token (1 MB bodies and uploads, default graph limits);
"token" is one with an API token configured.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

TOKEN = "s3cret-token"
JSON = "application/json"


@dataclass(frozen=True)
class Case:
    name: str
    method: str
    path: str
    status: int
    code: str
    body: bytes | None = None
    content_type: str | None = JSON
    headers: dict[str, str] = field(default_factory=dict[str, str])
    client: str = "open"


@dataclass(frozen=True)
class SocketCase:
    name: str
    path: str
    status: int
    code: str
    headers: dict[str, str] = field(default_factory=dict[str, str])
    client: str = "open"


# ---- builders ------------------------------------------------------------------------------------


def node(node_id: str, node_type: str, params: Any = None, **inputs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"id": node_id, "type": node_type}
    if params is not None:
        out["params"] = params
    if inputs:
        out["inputs"] = {
            port: {"from": src, "output": out_port} for port, (src, out_port) in inputs.items()
        }
    return out


def graph(*nodes: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"schemaVersion": 1, "nodes": list(nodes), **extra}


def body(value: Any) -> bytes:
    return json.dumps(value).encode()


def run(graph_value: Any, target: Any = "t", **extra: Any) -> bytes:
    return body({"graph": graph_value, "target": target, **extra})


def text(text_value: Any = "hi") -> dict[str, Any]:
    return node("t", "input/text", {"text": text_value})


def image_src(ref: Any) -> dict[str, Any]:
    return node("i", "input/image", {"asset": ref})


def resize(params: dict[str, Any]) -> bytes:
    """A resize of an (absent) asset, for param checks: params are checked before the asset."""
    nodes = (
        image_src({"ref": "asset", "id": "sha256-" + "0" * 64}),
        node("r", "image/resize", params, image=("i", "image")),
    )
    return run(graph(*nodes), "r")


def slow(params: dict[str, Any]) -> bytes:
    return run(graph(node("s", "test/slow", params)), "s")


def pick(model: Any) -> bytes:
    return run(graph(node("m", "test/pick", {"model": model})), "m")


def chain(length: int, *, cycle: bool = False) -> bytes:
    """input/image -> resize -> resize -> ... (`length` nodes); with `cycle`, the first resize
    reads the last one instead of the image."""
    nodes = [image_src({"ref": "asset", "id": "sha256-" + "1" * 64})]
    for i in range(1, length):
        source = f"r{i - 1}" if i > 1 else "i"
        if cycle and i == 1:
            source = f"r{length - 1}"
        nodes.append(node(f"r{i}", "image/resize", image=(source, "image")))
    return run(graph(*nodes), f"r{length - 1}")


def many_nodes(count: int) -> bytes:
    return run(graph(*(node(f"n{i}", "input/text", {"text": "x"}) for i in range(count))), "n0")


def png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_claiming(width: int, height: int) -> bytes:
    """A tiny PNG whose header claims `width` x `height`: a decompression bomb's shape."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + png_chunk(b"IHDR", ihdr)
        + png_chunk(b"IDAT", zlib.compress(b"\0" * 64))
        + png_chunk(b"IEND", b"")
    )


def nested(depth: int) -> bytes:
    value: Any = "x"
    for _ in range(depth):
        value = {"a": value}
    return run(graph(text(), meta=value))


MB = 1024 * 1024
LONG = "x" * 129


# ---- the corpus ------------------------------------------------------------------------------

RUNS = "/v1/runs"
ASSETS = "/v1/assets"


def bad_graph(name: str, run_body: bytes) -> Case:
    """A run submission the graph checks must refuse: 422 `invalid_graph`."""
    return Case(name, "POST", RUNS, 422, "invalid_graph", run_body)


def slow_inputs(inputs: Any) -> bytes:
    """A run of `test/slow` fed from a text node through `inputs`."""
    return run(graph(text(), {"id": "s", "type": "test/slow", "inputs": inputs}), "s")


CASES: list[Case] = [
    # Bodies that are not JSON, or not the JSON we take.
    Case("empty body", "POST", RUNS, 422, "invalid_request", b""),
    Case("not json", "POST", RUNS, 422, "invalid_request", b"graph=1&target=t"),
    Case("truncated json", "POST", RUNS, 422, "invalid_request", b'{"graph": {"nodes": [{"id"'),
    Case("invalid utf-8", "POST", RUNS, 422, "invalid_request", b'{"graph": "\xff\xfe"}'),
    Case("json array", "POST", RUNS, 422, "invalid_request", b"[1, 2, 3]"),
    Case("json string", "POST", RUNS, 422, "invalid_request", b'"graph"'),
    Case("json null", "POST", RUNS, 422, "invalid_request", b"null"),
    Case("NaN", "POST", RUNS, 422, "invalid_request", b'{"graph": NaN, "target": "t"}'),
    Case(
        "Infinity in a param",
        "POST",
        RUNS,
        422,
        "invalid_request",
        b'{"graph": {"nodes": [{"id": "s", "type": "test/slow", "params": {"delay": Infinity}}]},'
        b' "target": "s"}',
    ),
    Case("number overflowing to inf", "POST", RUNS, 422, "invalid_request", b'{"x": 1e999}'),
    Case(
        "5000-digit integer", "POST", RUNS, 422, "invalid_request", b'{"x": ' + b"9" * 5000 + b"}"
    ),
    Case(
        "100k nested arrays",
        "POST",
        RUNS,
        422,
        "invalid_request",
        b'{"graph": ' + b"[" * 100_000 + b"]" * 100_000 + b', "target": "t"}',
    ),
    Case("objects nested 80 deep", "POST", RUNS, 422, "invalid_request", nested(80)),
    Case(
        "body over the limit (declared)",
        "POST",
        RUNS,
        413,
        "payload_too_large",
        b'{"graph": "' + b"x" * MB + b'"}',
    ),
    Case(
        "content-length not a number",
        "POST",
        RUNS,
        422,
        "invalid_request",
        b"{}",
        headers={"content-length": "lots"},
    ),
    # Content types a browser may send cross-origin without asking, or none at all.
    Case(
        "text/plain json",
        "POST",
        RUNS,
        415,
        "unsupported_media_type",
        run(graph(text())),
        "text/plain",
    ),
    Case(
        "form-encoded",
        "POST",
        RUNS,
        415,
        "unsupported_media_type",
        b"graph=x",
        "application/x-www-form-urlencoded",
    ),
    Case(
        "multipart",
        "POST",
        RUNS,
        415,
        "unsupported_media_type",
        b"--b\r\n\r\n--b--",
        "multipart/form-data; boundary=b",
    ),
    Case("no content type", "POST", RUNS, 415, "unsupported_media_type", run(graph(text())), None),
    Case("xml", "POST", RUNS, 415, "unsupported_media_type", b"<graph/>", "application/xml"),
    Case(
        "import as text/plain",
        "POST",
        "/v1/import/comfy",
        415,
        "unsupported_media_type",
        b"{}",
        "text/plain",
    ),
    Case("import a json list", "POST", "/v1/import/comfy", 422, "invalid_request", b"[]"),
    Case(
        "import over the limit",
        "POST",
        "/v1/import/comfy",
        413,
        "payload_too_large",
        b'{"1": "' + b"x" * MB + b'"}',
    ),
    # The request's own fields.
    Case("graph missing", "POST", RUNS, 422, "invalid_request", body({"target": "t"})),
    Case("target missing", "POST", RUNS, 422, "invalid_request", body({"graph": graph(text())})),
    Case("unknown field", "POST", RUNS, 422, "invalid_request", run(graph(text()), priority=9)),
    Case(
        "misspelt clientRunId",
        "POST",
        RUNS,
        422,
        "invalid_request",
        run(graph(text()), clientRunID="a"),
    ),
    Case("target a number", "POST", RUNS, 422, "invalid_request", run(graph(text()), 5)),
    Case("target empty", "POST", RUNS, 422, "invalid_request", run(graph(text()), "")),
    Case("target too long", "POST", RUNS, 422, "invalid_request", run(graph(text()), "t" * 500)),
    Case("target not in graph", "POST", RUNS, 422, "invalid_request", run(graph(text()), "zz")),
    Case(
        "clientRunId a number",
        "POST",
        RUNS,
        422,
        "invalid_request",
        run(graph(text()), clientRunId=7),
    ),
    Case(
        "clientRunId too long",
        "POST",
        RUNS,
        422,
        "invalid_request",
        run(graph(text()), clientRunId="c" * 201),
    ),
    Case(
        "clientRunId empty",
        "POST",
        RUNS,
        422,
        "invalid_request",
        run(graph(text()), clientRunId=""),
    ),
    # The graph's shape.
    Case("graph a string", "POST", RUNS, 422, "invalid_graph", run("nodes")),
    Case("graph a list", "POST", RUNS, 422, "invalid_graph", run([text()])),
    Case("nodes not a list", "POST", RUNS, 422, "invalid_graph", run({"nodes": {"t": text()}})),
    Case("no nodes", "POST", RUNS, 422, "invalid_graph", run(graph())),
    Case("node a number", "POST", RUNS, 422, "invalid_graph", run({"nodes": [42]})),
    bad_graph("node id a number", run(graph({"id": 1, "type": "input/text"}))),
    bad_graph("node id too long", run(graph(node(LONG, "input/text")))),
    Case("type a number", "POST", RUNS, 422, "invalid_graph", run(graph({"id": "t", "type": 3}))),
    Case("type too long", "POST", RUNS, 422, "invalid_graph", run(graph(node("t", "x" * 300)))),
    Case(
        "unknown node type", "POST", RUNS, 422, "invalid_graph", run(graph(node("t", "evil/rm-rf")))
    ),
    bad_graph("params a list", run(graph({"id": "t", "type": "input/text", "params": ["x"]}))),
    bad_graph("inputs a string", run(graph({"id": "t", "type": "input/text", "inputs": "all"}))),
    bad_graph("edge a string", slow_inputs({"text": "t"})),
    bad_graph("edge from a number", slow_inputs({"text": {"from": 1, "output": "text"}})),
    bad_graph(
        "unknown edge key",
        run(
            graph(
                text(),
                {
                    "id": "s",
                    "type": "test/slow",
                    "inputs": {"text": {"from": "t", "output": "text", "x": 1}},
                },
            ),
            "s",
        ),
    ),
    bad_graph("empty edge list", slow_inputs({"text": []})),
    bad_graph(
        "300 edges on one node",
        run(
            graph(
                text(),
                {
                    "id": "s",
                    "type": "test/slow",
                    "inputs": {"text": [{"from": "t", "output": "text"}] * 300},
                },
            ),
            "s",
        ),
    ),
    bad_graph("port name too long", slow_inputs({LONG: {"from": "t", "output": "text"}})),
    bad_graph("300 params", run(graph(node("t", "input/text", {f"p{i}": i for i in range(300)})))),
    bad_graph(
        "unknown node key", run(graph({"id": "t", "type": "input/text", "exec": "rm -rf /"}))
    ),
    Case("unknown graph key", "POST", RUNS, 422, "invalid_graph", run(graph(text(), target="t"))),
    bad_graph("schemaVersion a string", run({"schemaVersion": "1", "nodes": [text()]})),
    bad_graph("schemaVersion 99", run({"schemaVersion": 99, "nodes": [text()]})),
    Case("duplicate node ids", "POST", RUNS, 422, "invalid_graph", run(graph(text(), text()))),
    Case(
        "2001 nodes (over the default limit)", "POST", RUNS, 422, "invalid_graph", many_nodes(2001)
    ),
    Case("deep chain of 2000 nodes", "POST", RUNS, 422, "invalid_graph", chain(2000)),
    Case(
        "cycle through a 500-node chain", "POST", RUNS, 422, "invalid_graph", chain(500, cycle=True)
    ),
    bad_graph("self loop", run(graph(node("r", "image/resize", image=("r", "image"))), "r")),
    bad_graph(
        "edge from a missing node",
        run(graph(node("r", "image/resize", image=("ghost", "image"))), "r"),
    ),
    bad_graph(
        "edge of the wrong kind",
        run(graph(text(), node("r", "image/resize", image=("t", "text"))), "r"),
    ),
    # Params.
    Case("text param a number", "POST", RUNS, 422, "invalid_graph", run(graph(text(5)))),
    Case("text param an object", "POST", RUNS, 422, "invalid_graph", run(graph(text({"$gt": ""})))),
    Case(
        "text over its limit", "POST", RUNS, 422, "invalid_graph", run(graph(text("x" * 100_001)))
    ),
    Case("number a string", "POST", RUNS, 422, "invalid_graph", resize({"width": "wide"})),
    Case("number a bool", "POST", RUNS, 422, "invalid_graph", resize({"width": True})),
    Case("number below min", "POST", RUNS, 422, "invalid_graph", resize({"width": 0})),
    Case("number far above max", "POST", RUNS, 422, "invalid_graph", resize({"height": 10**12})),
    Case("fraction for a whole number", "POST", RUNS, 422, "invalid_graph", resize({"width": 1.5})),
    Case("select not an option", "POST", RUNS, 422, "invalid_graph", resize({"mode": "explode"})),
    Case("select a list", "POST", RUNS, 422, "invalid_graph", resize({"mode": ["fit"]})),
    Case("select too long", "POST", RUNS, 422, "invalid_graph", resize({"mode": "f" * 5000})),
    Case("unknown param", "POST", RUNS, 422, "invalid_graph", resize({"__proto__": 1})),
    Case("seed below -1", "POST", RUNS, 422, "invalid_graph", slow({"seed": -2})),
    Case("seed above 2^63", "POST", RUNS, 422, "invalid_graph", slow({"seed": 2**64})),
    Case("seed a string", "POST", RUNS, 422, "invalid_graph", slow({"seed": "42"})),
    # Paths in media refs and model pickers never leave their roots.
    bad_graph("media ref a path", run(graph(image_src("/etc/passwd")), "i")),
    bad_graph(
        "media ref of a file", run(graph(image_src({"ref": "file", "id": "/etc/passwd"})), "i")
    ),
    bad_graph(
        "asset id traversal", run(graph(image_src({"ref": "asset", "id": "../runs.db"})), "i")
    ),
    bad_graph(
        "asset id absolute", run(graph(image_src({"ref": "asset", "id": "/etc/passwd"})), "i")
    ),
    bad_graph(
        "asset id hash-shaped traversal",
        run(graph(image_src({"ref": "asset", "id": "sha256-../../../etc/passwd"})), "i"),
    ),
    bad_graph(
        "take id traversal", run(graph(image_src({"ref": "take", "id": "tk_../../runs.db"})), "i")
    ),
    bad_graph(
        "media ref extra key",
        run(graph(image_src({"ref": "asset", "id": "sha256-0", "path": "/"})), "i"),
    ),
    bad_graph("media id too long", run(graph(image_src({"ref": "asset", "id": "a" * 500})), "i")),
    Case("model picker traversal", "POST", RUNS, 422, "invalid_graph", pick("../../../etc/passwd")),
    Case("model picker absolute", "POST", RUNS, 422, "invalid_graph", pick("/etc/passwd")),
    # A link out of models/ is never listed: a file not there (the user may download it).
    Case(
        "model picker link out of models/",
        "POST",
        RUNS,
        422,
        "model_missing",
        pick("outside.safetensors"),
    ),
    Case(
        "model picker dot segment", "POST", RUNS, 422, "invalid_graph", pick("./listed.safetensors")
    ),
    Case("model picker a number", "POST", RUNS, 422, "invalid_graph", pick(3)),
    # URLs.
    Case("take bytes traversal", "GET", "/v1/takes/..%2F..%2Fruns.db/bytes", 404, "not_found"),
    Case("take bytes absolute", "GET", "/v1/takes/%2Fetc%2Fpasswd/bytes", 404, "not_found"),
    Case("take url traversal", "GET", "/v1/takes/tk_..%2F..%2Fruns.db", 404, "not_found"),
    Case("run id traversal", "GET", "/v1/runs/..%2F..%2Fetc%2Fpasswd", 404, "not_found"),
    Case("run id with a NUL", "GET", "/v1/runs/run_%00x", 404, "not_found"),
    Case("model type traversal", "GET", "/v1/models/..%2F..%2Fetc%2Fpasswd", 404, "not_found"),
    Case("unknown route", "GET", "/v1/admin", 404, "not_found"),
    Case("unknown api version", "GET", "/v2/runs", 404, "not_found"),
    Case("cancel an unknown run", "DELETE", "/v1/runs/run_nope", 404, "not_found"),
    Case("cancel a finished run", "DELETE", "/v1/runs/{run}", 409, "conflict"),
    Case("wrong method", "PUT", RUNS, 405, "method_not_allowed", b"{}"),
    Case("GET on assets", "GET", ASSETS, 405, "method_not_allowed"),
    Case("limit not a number", "GET", "/v1/runs?limit=all", 422, "invalid_request"),
    Case("limit too large", "GET", "/v1/runs?limit=99999999", 422, "invalid_request"),
    Case("limit negative", "GET", "/v1/runs?limit=-5", 422, "invalid_request"),
    # Ranges of a real take.
    Case(
        "range not bytes",
        "GET",
        "/v1/takes/{take}/bytes",
        416,
        "range_not_satisfiable",
        headers={"range": "lines=1-2"},
    ),
    Case(
        "range past the end",
        "GET",
        "/v1/takes/{take}/bytes",
        416,
        "range_not_satisfiable",
        headers={"range": "bytes=99999999-"},
    ),
    Case(
        "range backwards",
        "GET",
        "/v1/takes/{take}/bytes",
        416,
        "range_not_satisfiable",
        headers={"range": "bytes=9-2"},
    ),
    Case(
        "range empty",
        "GET",
        "/v1/takes/{take}/bytes",
        416,
        "range_not_satisfiable",
        headers={"range": "bytes=-"},
    ),
    Case(
        "range garbage",
        "GET",
        "/v1/takes/{take}/bytes",
        416,
        "range_not_satisfiable",
        headers={"range": "bytes=a-b"},
    ),
    # Uploads.
    Case(
        "upload text",
        "POST",
        ASSETS,
        415,
        "unsupported_media_type",
        b"hello, world",
        "application/octet-stream",
    ),
    Case(
        "upload html",
        "POST",
        ASSETS,
        415,
        "unsupported_media_type",
        b"<script>alert(1)</script>",
        "image/png",
    ),
    Case("upload empty", "POST", ASSETS, 415, "unsupported_media_type", b"", "image/png"),
    Case(
        "upload as a form",
        "POST",
        ASSETS,
        415,
        "unsupported_media_type",
        b"--b\r\n\r\n--b--",
        "multipart/form-data; boundary=b",
    ),
    Case(
        "upload as text/plain",
        "POST",
        ASSETS,
        415,
        "unsupported_media_type",
        png_claiming(4, 4),
        "text/plain",
    ),
    Case(
        "upload an ELF binary",
        "POST",
        ASSETS,
        415,
        "unsupported_media_type",
        b"\x7fELF\x02\x01\x01" + b"\0" * 64,
        "image/png",
    ),
    Case(
        "png magic then garbage",
        "POST",
        ASSETS,
        415,
        "unsupported_media_type",
        b"\x89PNG\r\n\x1a\n" + b"garbage" * 20,
        "image/png",
    ),
    Case(
        "gif magic then garbage",
        "POST",
        ASSETS,
        415,
        "unsupported_media_type",
        b"GIF89a" + b"\xff" * 40,
        "image/gif",
    ),
    Case(
        "png claiming 9000x9000 (over the pixel limit)",
        "POST",
        ASSETS,
        413,
        "payload_too_large",
        png_claiming(9000, 9000),
        "image/png",
    ),
    Case(
        "png claiming 100000x100000 (a bomb)",
        "POST",
        ASSETS,
        413,
        "payload_too_large",
        png_claiming(100_000, 100_000),
        "image/png",
    ),
    Case(
        "upload over the limit",
        "POST",
        ASSETS,
        413,
        "payload_too_large",
        png_claiming(4, 4) + b"\0" * MB,
        "image/png",
    ),
    # A web page on another origin (no token configured).
    Case(
        "cross-origin submit",
        "POST",
        RUNS,
        403,
        "forbidden",
        run(graph(text())),
        headers={"origin": "https://evil.example"},
    ),
    Case(
        "cross-origin cancel",
        "DELETE",
        "/v1/runs/{run}",
        403,
        "forbidden",
        headers={"origin": "https://evil.example"},
    ),
    Case(
        "null origin upload",
        "POST",
        ASSETS,
        403,
        "forbidden",
        png_claiming(4, 4),
        "image/png",
        headers={"origin": "null"},
    ),
    # Tokens (a token is configured).
    Case("no token", "GET", RUNS, 401, "unauthorized", client="token"),
    Case(
        "wrong token",
        "GET",
        RUNS,
        401,
        "unauthorized",
        client="token",
        headers={"authorization": "Bearer wrong"},
    ),
    Case(
        "empty bearer",
        "GET",
        RUNS,
        401,
        "unauthorized",
        client="token",
        headers={"authorization": "Bearer "},
    ),
    Case(
        "basic auth",
        "GET",
        RUNS,
        401,
        "unauthorized",
        client="token",
        headers={"authorization": "Basic czNjcmV0LXRva2Vu"},
    ),
    Case(
        "token with extra",
        "GET",
        RUNS,
        401,
        "unauthorized",
        client="token",
        headers={"authorization": f"Bearer {TOKEN}x"},
    ),
    Case(
        "token prefix",
        "GET",
        RUNS,
        401,
        "unauthorized",
        client="token",
        headers={"authorization": f"Bearer {TOKEN[:-1]}"},
    ),
    Case(
        "token in the wrong query param",
        "GET",
        f"{RUNS}?access_token={TOKEN}",
        401,
        "unauthorized",
        client="token",
    ),
    Case("wrong query token", "GET", f"{RUNS}?token=nope", 401, "unauthorized", client="token"),
    Case("empty query token", "GET", f"{RUNS}?token=", 401, "unauthorized", client="token"),
    Case(
        "submit without token",
        "POST",
        RUNS,
        401,
        "unauthorized",
        run(graph(text())),
        client="token",
    ),
    Case(
        "upload without token",
        "POST",
        ASSETS,
        401,
        "unauthorized",
        png_claiming(4, 4),
        "image/png",
        client="token",
    ),
    Case(
        "take bytes without token",
        "GET",
        "/v1/takes/tk_x/bytes",
        401,
        "unauthorized",
        client="token",
    ),
    Case("models without token", "GET", "/v1/models", 401, "unauthorized", client="token"),
    Case("unknown route without token", "GET", "/v1/secret", 401, "unauthorized", client="token"),
]

SOCKET_CASES: list[SocketCase] = [
    SocketCase("events of an unknown run", "/v1/runs/run_nope/events", 404, "not_found"),
    SocketCase("events traversal", "/v1/runs/..%2F..%2Fruns.db/events", 404, "not_found"),
    SocketCase(
        "events without token", "/v1/runs/{run}/events", 401, "unauthorized", client="token"
    ),
    SocketCase(
        "events with a wrong token",
        "/v1/runs/{run}/events?token=nope",
        401,
        "unauthorized",
        client="token",
    ),
    SocketCase(
        "events with a wrong bearer",
        "/v1/runs/{run}/events",
        401,
        "unauthorized",
        {"authorization": "Bearer nope"},
        client="token",
    ),
    SocketCase(
        "events from another origin",
        "/v1/runs/{run}/events",
        403,
        "forbidden",
        {"origin": "https://evil.example"},
    ),
]
