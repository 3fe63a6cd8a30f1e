"""Assets in, takes out: uploads, image graphs, take metadata and byte serving (ETag, ranges)."""

from __future__ import annotations

import hashlib
import io
from dataclasses import replace
from typing import Any, cast

from fastapi import FastAPI
from fastapi.testclient import TestClient
from PIL import Image
from server_support import wait_until

from inline_core.config import Config
from inline_core.server.app import create_app
from inline_core.server.bootstrap import Services


def png(colour: tuple[int, int, int], size: tuple[int, int] = (32, 24)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, format="PNG")
    return buf.getvalue()


def upload(client: TestClient, data: bytes, content_type: str = "image/png") -> dict[str, Any]:
    response = client.post("/v1/assets", content=data, headers={"content-type": content_type})
    assert response.status_code == 201, response.text
    return response.json()


def resize_graph(ref: dict[str, str]) -> dict[str, Any]:
    return {
        "schemaVersion": 1,
        "nodes": [
            {"id": "img", "type": "input/image", "params": {"asset": ref}},
            {
                "id": "r",
                "type": "image/resize",
                "params": {"width": 8, "height": 6, "mode": "stretch"},
                "inputs": {"image": {"from": "img", "output": "image"}},
            },
        ],
    }


def run_to_done(client: TestClient, graph: dict[str, Any], target: str) -> dict[str, Any]:
    response = client.post("/v1/runs", json={"graph": graph, "target": target})
    assert response.status_code == 201, response.text
    run_id = response.json()["runId"]

    def finished() -> dict[str, Any] | None:
        state = client.get(f"/v1/runs/{run_id}").json()
        return state if state["status"] in ("done", "error", "cancelled") else None

    state = wait_until(finished, f"run {run_id}")
    assert state["status"] == "done", state
    return state


def test_upload_is_content_addressed_and_sniffed(client: TestClient) -> None:
    data = png((1, 2, 3))
    first = upload(client, data, "application/octet-stream")  # the claimed type is not trusted
    assert first == {
        "id": "sha256-" + hashlib.sha256(data).hexdigest(),
        "kind": "image",
        "bytes": len(data),
        "contentType": "image/png",
    }
    assert upload(client, data) == first
    # Its record is in the run store too (shared by every server on PostgreSQL), once.
    app = cast(FastAPI, client.app)
    services = cast(Services, app.state.services)
    stored = services.runs.get_asset(first["id"])
    assert stored is not None
    assert (stored.kind, stored.content_type, stored.size) == ("image", "image/png", len(data))


def test_uploads_that_are_not_media_or_too_big_are_refused(config: Config) -> None:
    with TestClient(create_app(replace(config, max_upload_mb=1))) as client:
        text = client.post("/v1/assets", content=b"just some text")
        assert text.status_code == 415
        assert text.json()["error"]["code"] == "unsupported_media_type"
        empty = client.post("/v1/assets", content=b"")
        assert empty.status_code == 415
        big = png((0, 0, 0))[:16] + b"\0" * (1024 * 1024)
        too_big = client.post("/v1/assets", content=big)
        assert too_big.status_code == 413
        assert too_big.json()["error"]["code"] == "payload_too_large"

        def chunks() -> Any:  # no Content-Length: the limit is enforced while streaming
            yield png((0, 0, 0))[:16]
            for _ in range(20):
                yield b"\0" * (64 * 1024)

        streamed = client.post("/v1/assets", content=chunks())
        assert streamed.status_code == 413
        leftovers = list(config.assets_dir.iterdir())
        assert leftovers == []


def test_an_image_graph_makes_a_take_served_with_etag_and_ranges(client: TestClient) -> None:
    asset = upload(client, png((250, 0, 0)))
    state = run_to_done(client, resize_graph({"ref": "asset", "id": asset["id"]}), "r")
    [take] = state["takes"]
    assert take["nodeId"] == "r" and take["kind"] == "image"
    assert take["params"] == {"width": 8, "height": 6, "mode": "stretch", "resample": "lanczos"}

    whole = client.get(take["uri"])
    assert whole.status_code == 200
    assert whole.headers["content-type"] == "image/png"
    assert whole.headers["etag"] == f'"{take["hash"]}"'
    assert whole.headers["accept-ranges"] == "bytes"
    data = whole.content
    assert take["hash"] == "sha256-" + hashlib.sha256(data).hexdigest()
    with Image.open(io.BytesIO(data)) as image:
        assert image.size == (8, 6)
        assert image.getpixel((4, 3)) == (250, 0, 0)
        assert "inline:graph" in image.info  # PNG takes carry their graph

    cached = client.get(take["uri"], headers={"if-none-match": whole.headers["etag"]})
    assert cached.status_code == 304 and cached.content == b""

    size = len(data)
    head = client.get(take["uri"], headers={"range": "bytes=0-9"})
    assert head.status_code == 206
    assert head.headers["content-range"] == f"bytes 0-9/{size}"
    assert head.content == data[:10]
    tail = client.get(take["uri"], headers={"range": "bytes=-5"})
    assert tail.status_code == 206 and tail.content == data[-5:]
    rest = client.get(take["uri"], headers={"range": f"bytes={size - 3}-"})
    assert rest.content == data[-3:]
    clipped = client.get(take["uri"], headers={"range": f"bytes=4-{size + 100}"})
    assert clipped.content == data[4:]
    several = client.get(take["uri"], headers={"range": "bytes=0-1,4-5"})
    assert several.status_code == 200 and several.content == data

    for bad in (f"bytes={size}-", "bytes=9-3", "bytes=abc", "items=0-1", "bytes=-0"):
        refused = client.get(take["uri"], headers={"range": bad})
        assert refused.status_code == 416, bad
        assert refused.headers["content-range"] == f"bytes */{size}"
        assert refused.json()["error"]["code"] == "range_not_satisfiable"


def test_a_take_feeds_a_later_graph(client: TestClient) -> None:
    asset = upload(client, png((0, 200, 0)))
    first = run_to_done(client, resize_graph({"ref": "asset", "id": asset["id"]}), "r")
    take_id = first["takes"][0]["id"]
    second = run_to_done(client, resize_graph({"ref": "take", "id": take_id}), "r")
    assert second["takes"][0]["id"] != take_id


def test_graphs_naming_missing_media_are_refused_at_submit(client: TestClient) -> None:
    for ref in (
        {"ref": "asset", "id": "sha256-" + "0" * 64},
        {"ref": "asset", "id": "../../runs.db"},
        {"ref": "take", "id": "tk_nope"},
        {"ref": "take", "id": "/etc/passwd"},
    ):
        response = client.post("/v1/runs", json={"graph": resize_graph(ref), "target": "r"})
        assert response.status_code == 422, ref
        assert response.json()["error"]["code"] == "invalid_graph"
        assert response.json()["error"]["nodeId"] == "img"
