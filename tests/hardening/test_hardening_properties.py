"""Property-based: random JSON bodies, random graphs, random bytes and random URLs against the app.

Whatever arrives, the answer is never a 5xx, and every 4xx is the error envelope. Examples are
derived deterministically (`derandomize`), so a run is repeatable, and bounded to keep it quick.
"""

from __future__ import annotations

import io
import string
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from inline_core.config import Config
from inline_core.server.app import create_app

BOUNDED = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

NODE_TYPES = [
    "input/text",
    "input/image",
    "image/resize",
    "image/crop",
    "image/flip",
    "image/rotate",
    "test/pick",
    "no/such-type",
]
PARAM_NAMES = [
    "text",
    "asset",
    "width",
    "height",
    "mode",
    "resample",
    "x",
    "y",
    "direction",
    "degrees",
    "model",
    "seed",
    "extra",
]
PORTS = ["image", "text", "prompt", "bogus"]
OUTPUTS = ["image", "text", "nope"]
IDS = ["a", "b", "c", "d"]

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-10, 64)
    | st.sampled_from([0, -1, 8193, 2**53, 2**63, -(2**63), 10**30])
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.text(max_size=12)
    | st.sampled_from(["fit", "fill", "stretch", "90", "vertical", "listed.safetensors", "../x"])
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=16,
)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    root = tmp_path_factory.mktemp("props")
    (root / "models" / "diffusion_models").mkdir(parents=True)
    (root / "models" / "diffusion_models" / "listed.safetensors").write_bytes(b"w")
    config = Config(
        models_dir=root / "models",
        data_dir=root / "data",
        profile="cpu",
        dtype="float32",
        plugins=("hardening_nodes:register",),
        run_workers=1,
        max_body_mb=1,
        max_upload_mb=1,
        max_queue=50,
    )
    with TestClient(create_app(config)) as c:
        yield c


@pytest.fixture(scope="module")
def asset_id(client: TestClient) -> str:
    buf = io.BytesIO()
    Image.new("RGB", (6, 5), (1, 2, 3)).save(buf, format="PNG")
    response = client.post(
        "/v1/assets", content=buf.getvalue(), headers={"content-type": "image/png"}
    )
    return str(response.json()["id"])


def assert_sound(response: Any) -> None:
    assert response.status_code < 500, (response.status_code, response.text[:500])
    if response.status_code >= 400 and response.request.method != "HEAD":
        payload = response.json()
        assert set(payload) == {"error"}, payload
        error = payload["error"]
        assert isinstance(error["code"], str) and isinstance(error["message"], str)


@st.composite
def edges(draw: st.DrawFn) -> Any:
    edge = {"from": draw(st.sampled_from(IDS)), "output": draw(st.sampled_from(OUTPUTS))}
    return draw(st.sampled_from([edge, [edge], [edge, edge], "a", None, {"from": 1}]))


@st.composite
def media_refs(draw: st.DrawFn, real_asset: str) -> Any:
    ref = draw(st.sampled_from(["asset", "take", "file"]))
    ident = draw(st.sampled_from([real_asset, "sha256-" + "0" * 64, "../runs.db", "tk_1", ""]))
    return draw(st.sampled_from([{"ref": ref, "id": ident}, {"ref": "asset", "id": real_asset}]))


@st.composite
def graph_nodes(draw: st.DrawFn, real_asset: str) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for name in draw(st.lists(st.sampled_from(PARAM_NAMES), max_size=4, unique=True)):
        params[name] = draw(media_refs(real_asset)) if name == "asset" else draw(json_values)
    node: dict[str, Any] = {
        "id": draw(st.sampled_from(IDS)),
        "type": draw(st.sampled_from(NODE_TYPES)),
        "params": params,
    }
    ports = draw(st.lists(st.sampled_from(PORTS), max_size=2, unique=True))
    if ports:
        node["inputs"] = {port: draw(edges()) for port in ports}
    return node


@st.composite
def submissions(draw: st.DrawFn, real_asset: str) -> dict[str, Any]:
    nodes = draw(st.lists(graph_nodes(real_asset), min_size=1, max_size=5))
    body: dict[str, Any] = {
        "graph": {"schemaVersion": draw(st.sampled_from([1, 1, 1, 2, "1"])), "nodes": nodes},
        "target": draw(st.sampled_from([*IDS, "", 3, None])),
    }
    if draw(st.booleans()):
        body["clientRunId"] = draw(st.text(max_size=8) | st.integers())
    return body


def test_random_json_bodies_never_get_a_5xx(client: TestClient) -> None:
    @BOUNDED
    @given(value=json_values)
    def check(value: Any) -> None:
        assert_sound(client.post("/v1/runs", json=value))

    check()


def test_random_graphs_never_get_a_5xx(client: TestClient, asset_id: str) -> None:
    accepted: list[str] = []

    @BOUNDED
    @given(body=submissions(asset_id))
    def check(body: dict[str, Any]) -> None:
        response = client.post("/v1/runs", json=body)
        assert_sound(response)
        if response.status_code in (200, 201):
            run_id = response.json()["runId"]
            accepted.append(run_id)
            assert_sound(client.get(f"/v1/runs/{run_id}"))

    check()
    assert accepted, "no random graph was accepted: the property never reached the queue"


def test_random_bytes_never_get_a_5xx(client: TestClient) -> None:
    content_types = st.sampled_from(
        ["application/json", "image/png", "text/plain", "application/octet-stream", "", "a/b;c"]
    )
    magic = st.sampled_from([b"", b"\x89PNG\r\n\x1a\n", b"GIF89a", b"\xff\xd8\xff", b"RIFF", b"{"])

    @BOUNDED
    @given(
        path=st.sampled_from(["/v1/runs", "/v1/assets"]),
        head=magic,
        tail=st.binary(max_size=300),
        content_type=content_types,
    )
    def check(path: str, head: bytes, tail: bytes, content_type: str) -> None:
        headers = {"content-type": content_type} if content_type else {}
        assert_sound(client.post(path, content=head + tail, headers=headers))

    check()


def test_random_urls_and_headers_never_get_a_5xx(client: TestClient) -> None:
    segment = st.text(alphabet=string.printable + "é\u202e\x00", max_size=12)
    prefixes = st.sampled_from(
        ["/v1/runs/", "/v1/takes/", "/v1/models/", "/v1/assets/", "/v1/", "/", "/v1/health/"]
    )
    suffixes = st.sampled_from(["", "/bytes", "/events", "/..", "?limit=3", "?limit=x"])
    methods = st.sampled_from(["GET", "DELETE", "HEAD", "OPTIONS", "PUT", "PATCH", "POST"])
    header_values = st.text(alphabet=string.printable, max_size=20)

    @BOUNDED
    @given(
        method=methods,
        prefix=prefixes,
        segments=st.lists(segment, max_size=3),
        suffix=suffixes,
        range_header=st.none() | header_values.map(lambda v: "bytes=" + v),
        etag=st.none() | header_values,
    )
    def check(
        method: str,
        prefix: str,
        segments: list[str],
        suffix: str,
        range_header: str | None,
        etag: str | None,
    ) -> None:
        path = prefix + "/".join(quote(s, safe="") for s in segments) + suffix
        headers: dict[str, str] = {}
        if range_header is not None:
            headers["range"] = range_header.strip()
        if etag is not None:
            headers["if-none-match"] = etag.strip()
        assert_sound(client.request(method, path, headers=headers))

    check()


COMFY_KEYS = ["1", "2", "¹", "10:3", "nodes", "links", "workflow", "assets", "prompt"]
comfy_nodes = st.fixed_dictionaries(
    {
        "class_type": st.sampled_from(["KSampler", "CLIPTextEncode", "LoadImage", "Nope"]),
        "inputs": st.dictionaries(
            st.sampled_from(["text", "seed", "image", "model", "clip", "steps", "width"]),
            json_values | st.lists(st.text(max_size=3) | st.integers(), max_size=2),
            max_size=4,
        ),
    }
)


def test_random_comfy_workflows_never_get_a_5xx(client: TestClient) -> None:
    @BOUNDED
    @given(
        value=json_values
        | st.dictionaries(st.sampled_from(COMFY_KEYS), json_values, max_size=5)
        | st.dictionaries(st.sampled_from(COMFY_KEYS), comfy_nodes, max_size=4)
    )
    def check(value: Any) -> None:
        assert_sound(client.post("/v1/import/comfy", json=value))

    check()
