"""ComfyUI's routes behind the same guards as `/v1`: the token beyond loopback (a `?token=` link
sets an HttpOnly cookie the frontend's requests then carry), and a cross-site page refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from inline_core.config import Config
from inline_core.server.app import create_app

TOKEN = "s3cret-token"


@pytest.fixture(scope="module")
def guarded(kit_models: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    data = tmp_path_factory.mktemp("guarded") / "data"
    config = Config(models_dir=kit_models, data_dir=data, profile="cpu", api_token=TOKEN)
    with TestClient(create_app(config)) as c:
        yield c


@pytest.mark.parametrize("path", ["/prompt", "/api/object_info", "/history", "/api/userdata"])
def test_the_api_needs_the_token(guarded: TestClient, path: str) -> None:
    assert guarded.get(path).status_code == 401
    headers = {"Authorization": f"Bearer {TOKEN}"}
    assert guarded.get(path, headers=headers).status_code != 401


def test_the_socket_needs_the_token(guarded: TestClient) -> None:
    with pytest.raises(WebSocketDisconnect), guarded.websocket_connect("/ws") as ws:
        ws.receive_json()
    with guarded.websocket_connect(f"/ws?token={TOKEN}") as ws:
        assert ws.receive_json()["type"] == "status"


def test_a_token_link_sets_a_cookie_once(guarded: TestClient) -> None:
    guarded.cookies.clear()
    assert guarded.get("/").status_code == 200  # the page itself is open
    wrong = guarded.get("/?token=nope", follow_redirects=False)
    assert wrong.status_code == 401
    link = guarded.get(f"/?token={TOKEN}", follow_redirects=False)
    assert link.status_code == 303 and link.headers["location"] == "/"
    cookie = link.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert guarded.get("/api/object_info").status_code == 200  # the cookie carries it now
    guarded.cookies.clear()
    assert guarded.get("/api/object_info").status_code == 401


def test_a_cross_site_page_is_refused(client: TestClient) -> None:
    evil = {"Origin": "http://evil.example", "Host": "127.0.0.1:8848"}
    assert client.post("/api/prompt", json={}, headers=evil).status_code == 403
    assert client.get("/api/history", headers=evil).status_code == 403
    same = {"Origin": "http://127.0.0.1:8848", "Host": "127.0.0.1:8848"}
    assert client.get("/api/history", headers=same).status_code == 200
    with pytest.raises(WebSocketDisconnect), client.websocket_connect("/ws", headers=evil) as ws:
        ws.receive_json()
