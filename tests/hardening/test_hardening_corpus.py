"""Every entry of the hostile-input corpus gets its 4xx, in the error envelope, and nothing else."""

from __future__ import annotations

import io
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hardening_corpus import CASES, SOCKET_CASES, TOKEN, Case, SocketCase
from PIL import Image
from starlette.testclient import WebSocketDenialResponse

from inline_core.config import Config
from inline_core.server.app import create_app
from tests.server.server_support import PLUGIN

PLUGINS = (PLUGIN, "hardening_nodes:register")
MAX_MESSAGE = 2100  # the envelope's message is clipped; a hostile body never echoes back whole


@dataclass
class Servers:
    open: TestClient
    token: TestClient
    take_id: str
    run_id: str

    def client(self, name: str) -> TestClient:
        return self.token if name == "token" else self.open

    def fill(self, path: str) -> str:
        return path.replace("{take}", self.take_id).replace("{run}", self.run_id)


def models_with_a_link_out(root: Path) -> Path:
    """models/diffusion_models/ holding one real file and one link to a file outside models/."""
    models = root / "models"
    folder = models / "diffusion_models"
    folder.mkdir(parents=True)
    (folder / "listed.safetensors").write_bytes(b"weights")
    secret = root / "outside-secret.safetensors"
    secret.write_bytes(b"not yours")
    os.symlink(secret, folder / "outside.safetensors")
    return models


def png(size: tuple[int, int] = (16, 12)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, (10, 200, 30)).save(buf, format="PNG")
    return buf.getvalue()


def finished_run_with_a_take(client: TestClient) -> tuple[str, str]:
    asset = client.post("/v1/assets", content=png(), headers={"content-type": "image/png"})
    assert asset.status_code == 201, asset.text
    ref = {"ref": "asset", "id": asset.json()["id"]}
    graph = {
        "nodes": [
            {"id": "i", "type": "input/image", "params": {"asset": ref}},
            {
                "id": "r",
                "type": "image/resize",
                "params": {"width": 8, "height": 8, "mode": "stretch"},
                "inputs": {"image": {"from": "i", "output": "image"}},
            },
        ]
    }
    submitted = client.post("/v1/runs", json={"graph": graph, "target": "r"})
    assert submitted.status_code == 201, submitted.text
    run_id = str(submitted.json()["runId"])
    deadline = time.monotonic() + 30  # a liveness bound, not a timing assertion
    while True:
        state: dict[str, Any] = client.get(f"/v1/runs/{run_id}").json()
        if state["status"] == "done":
            return run_id, str(state["takes"][0]["id"])
        assert state["status"] in ("queued", "running"), state
        assert time.monotonic() < deadline, state
        time.sleep(0.01)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    root = tmp_path_factory.mktemp("corpus")
    models = models_with_a_link_out(root)
    base = Config(
        models_dir=models,
        data_dir=root / "open",
        profile="cpu",
        dtype="float32",
        plugins=PLUGINS,
        run_workers=1,
        max_body_mb=1,
        max_upload_mb=1,
    )
    guarded = Config(
        models_dir=models,
        data_dir=root / "token",
        profile="cpu",
        dtype="float32",
        plugins=PLUGINS,
        api_token=TOKEN,
    )
    with TestClient(create_app(base)) as open_client, TestClient(create_app(guarded)) as token:
        run_id, take_id = finished_run_with_a_take(open_client)
        yield Servers(open_client, token, take_id, run_id)


def assert_envelope(response: Any, status: int, code: str) -> None:
    assert response.status_code == status, response.text[:500]
    payload = response.json()
    assert set(payload) == {"error"}, payload
    error = payload["error"]
    assert error["code"] == code, error
    assert isinstance(error["message"], str) and error["message"]
    assert len(error["message"]) <= MAX_MESSAGE
    assert set(error) <= {"code", "message", "nodeId"}
    assert response.headers["content-type"] == "application/json"


def test_the_corpus_is_big_enough() -> None:
    assert len(CASES) + len(SOCKET_CASES) >= 50
    assert len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_request_gets_its_4xx_in_the_envelope(servers: Servers, case: Case) -> None:
    headers = dict(case.headers)
    if case.content_type is not None:
        headers["content-type"] = case.content_type
    response = servers.client(case.client).request(
        case.method, servers.fill(case.path), content=case.body, headers=headers
    )
    assert_envelope(response, case.status, case.code)
    if case.status == 401:
        assert response.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize("case", SOCKET_CASES, ids=[c.name for c in SOCKET_CASES])
def test_hostile_websocket_is_refused_in_the_envelope(servers: Servers, case: SocketCase) -> None:
    client = servers.client(case.client)
    with (
        pytest.raises(WebSocketDenialResponse) as denied,
        client.websocket_connect(servers.fill(case.path), headers=case.headers),
    ):
        pass
    assert_envelope(denied.value, case.status, case.code)


def test_the_fixtures_really_exist_so_refusals_are_not_accidents(servers: Servers) -> None:
    """The traversal and token cases must fail because of the attack, not a missing object."""
    client = servers.open
    assert client.get(f"/v1/takes/{servers.take_id}/bytes").status_code == 200
    assert client.get(f"/v1/runs/{servers.run_id}").json()["status"] == "done"
    ok = {"authorization": f"Bearer {TOKEN}"}
    assert servers.token.get("/v1/runs", headers=ok).status_code == 200
    assert servers.token.get(f"/v1/runs?token={TOKEN}").status_code == 200
    # The picker takes the listed file, and only it (the link out of models/ is not listed).
    picked = client.post(
        "/v1/runs",
        json={
            "graph": {
                "nodes": [
                    {"id": "m", "type": "test/pick", "params": {"model": "listed.safetensors"}}
                ]
            },
            "target": "m",
        },
    )
    assert picked.status_code == 201, picked.text
    listed = client.get("/v1/models").json()
    [pick] = [d for d in listed["models"] if d["type"] == "test/pick"]
    assert pick["params"][0]["options"] == ["listed.safetensors"]
