"""Health, models and the catalog, access control, CORS, the frontend, and error envelopes."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from server_support import text_graph, wait_until
from starlette.testclient import WebSocketDenialResponse

from inline_core.config import Config
from inline_core.server.app import create_app


def test_health(client: TestClient, config: Config) -> None:
    response = client.get("/v1/health")
    assert response.status_code == 200
    body = response.json()
    backend = "postgresql" if config.database_url else "sqlite"
    assert body["store"]["backend"] == backend and body["store"]["reachable"] is True
    assert body["leases"] == [] and body["leaseTimeoutS"] == config.lease_timeout_s
    assert [s["serverId"] for s in body["servers"]] == [body["serverId"]]  # itself, alive
    assert body["ok"] is True and body["apiVersion"] == "v1"
    assert body["schemaVersions"] == {"min": 1, "max": 1}
    assert body["registryVersion"].startswith("r_")
    assert body["device"]["kind"] == "cpu" and body["device"]["profile"] == "cpu"
    assert "vramBudgetMb" in body["device"]
    assert body["runs"] == {"queued": 0, "running": 0}


def test_models_with_etag_and_304(client: TestClient) -> None:
    response = client.get("/v1/models")
    assert response.status_code == 200
    body = response.json()
    version = body["registryVersion"]
    assert response.headers["etag"] == f'"{version}"'
    assert version == client.get("/v1/health").json()["registryVersion"]
    types = {m["type"] for m in body["models"]}
    assert {"input/text", "input/image", "image/resize", "image/crop", "test/slow"} <= types
    text = next(m for m in body["models"] if m["type"] == "input/text")
    assert set(text) >= {
        "type",
        "title",
        "category",
        "icon",
        "source",
        "outputKind",
        "inputs",
        "outputs",
        "params",
    }
    assert text["hidden"] is True
    assert set(body["catalog"]) >= {"diffusion_models", "vae", "text_encoders"}

    for tag in (response.headers["etag"], version, f'W/"{version}"', f'"x", "{version}"'):
        cached = client.get("/v1/models", headers={"if-none-match": tag})
        assert cached.status_code == 304 and cached.content == b""
        assert cached.headers["etag"] == response.headers["etag"]
    assert client.get("/v1/models", headers={"if-none-match": '"r_old"'}).status_code == 200


def test_one_model_and_an_unknown_one(client: TestClient) -> None:
    resize = client.get("/v1/models/image/resize")
    assert resize.status_code == 200 and resize.json()["type"] == "image/resize"
    missing = client.get("/v1/models/no/such-node")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"


def test_dropping_a_model_file_changes_the_version_and_picker_options(
    client: TestClient, config: Config
) -> None:
    before = client.get("/v1/models")
    picker = client.get("/v1/models/load/diffusion-model").json()["params"][0]
    assert picker["optionsFrom"] == "diffusion_models" and picker["options"] == []

    folder = config.models_dir / "diffusion_models"
    folder.mkdir(parents=True)
    (folder / "tiny.safetensors").write_bytes(b"\0" * 16)

    def changed() -> str | None:
        version = client.get("/v1/models").json()["registryVersion"]
        return version if version != before.json()["registryVersion"] else None

    version = wait_until(changed, "the catalog scan to see the new file", timeout=10)
    assert client.get("/v1/models").headers["etag"] == f'"{version}"'
    stale = client.get("/v1/models", headers={"if-none-match": before.headers["etag"]})
    assert stale.status_code == 200
    picker = client.get("/v1/models/load/diffusion-model").json()["params"][0]
    assert picker["options"] == ["tiny.safetensors"]
    listing = client.get("/v1/models").json()["catalog"]["diffusion_models"]
    assert listing == [{"name": "tiny.safetensors", "folder": False, "bytes": 16}]


def test_unknown_routes_and_wrong_methods_get_the_envelope(client: TestClient) -> None:
    for method, path, status, code in (
        ("GET", "/v1/nothing-here", 404, "not_found"),
        ("POST", "/v1/nothing-here", 404, "not_found"),
        ("GET", "/elsewhere", 404, "not_found"),
        ("PUT", "/v1/runs", 405, "method_not_allowed"),
        ("DELETE", "/v1/health", 405, "method_not_allowed"),
        ("POST", "/v1/takes/tk_x", 405, "method_not_allowed"),
    ):
        response = client.request(method, path)
        assert response.status_code == status, (method, path)
        assert response.json()["error"]["code"] == code
        assert response.headers["content-type"] == "application/json"


def test_an_unexpected_exception_is_a_500_envelope_without_traceback(config: Config) -> None:
    app = create_app(config)

    async def broken() -> None:
        raise RuntimeError("secret internals")

    app.add_api_route("/v1/broken", broken)
    with TestClient(app) as client:
        response = client.get("/v1/broken")
    assert response.status_code == 500
    assert response.json() == {
        "error": {"code": "internal", "message": "the server hit an unexpected error"}
    }
    assert "secret" not in response.text and "Traceback" not in response.text


@pytest.fixture
def guarded(config: Config) -> TestClient:
    return TestClient(create_app(replace(config, api_token="s3cret-token")))


def test_a_token_guards_every_route_but_health(guarded: TestClient) -> None:
    with guarded as client:
        assert client.get("/v1/health").status_code == 200
        for method, path in (
            ("GET", "/v1/models"),
            ("GET", "/v1/runs"),
            ("POST", "/v1/runs"),
            ("GET", "/v1/runs/run_x"),
            ("DELETE", "/v1/runs/run_x"),
            ("GET", "/v1/takes/tk_x/bytes"),
            ("POST", "/v1/assets"),
            ("GET", "/v1/nowhere"),
        ):
            for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": "Basic x"}):
                response = client.request(method, path, headers=headers)
                assert response.status_code == 401, (method, path, headers)
                assert response.json()["error"]["code"] == "unauthorized"
                assert response.headers["www-authenticate"].startswith("Bearer")
        assert client.get("/v1/runs?token=wrong").status_code == 401

        ok = {"authorization": "Bearer s3cret-token"}
        assert client.get("/v1/models", headers=ok).status_code == 200
        assert client.get("/v1/models?token=s3cret-token").status_code == 200
        submitted = client.post("/v1/runs", json={"graph": text_graph(), "target": "t"}, headers=ok)
        assert submitted.status_code == 201
        run_id = submitted.json()["runId"]

        with pytest.raises(WebSocketDenialResponse) as denied:
            with client.websocket_connect(f"/v1/runs/{run_id}/events"):
                pass
        assert denied.value.status_code == 401
        assert denied.value.json()["error"]["code"] == "unauthorized"
        with client.websocket_connect(f"/v1/runs/{run_id}/events?token=s3cret-token") as ws:
            assert ws.receive_json()["type"] == "snapshot"


def test_cors_for_configured_origins(config: Config) -> None:
    app = create_app(replace(config, cors_origins=("http://studio.local",), api_token="tok"))
    with TestClient(app) as client:
        preflight = client.options(
            "/v1/runs",
            headers={
                "origin": "http://studio.local",
                "access-control-request-method": "POST",
                "access-control-request-headers": "authorization, content-type",
            },
        )
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == "http://studio.local"
        # Even a refusal carries the CORS header, so the app can read the envelope.
        refused = client.get("/v1/runs", headers={"origin": "http://studio.local"})
        assert refused.status_code == 401
        assert refused.headers["access-control-allow-origin"] == "http://studio.local"
        other = client.get("/v1/health", headers={"origin": "http://evil.example"})
        assert "access-control-allow-origin" not in other.headers


def test_frontend_is_served_behind_the_api(config: Config, tmp_path: Path) -> None:
    root = tmp_path / "front"
    (root / "assets").mkdir(parents=True)
    (root / "index.html").write_text("<html>studio</html>")
    (root / "assets" / "app.js").write_text("console.log('hi')")
    secret = tmp_path / "secret.txt"
    secret.write_text("do not serve")
    os.symlink(secret, root / "leak.txt")
    with TestClient(create_app(replace(config, frontend_root=root))) as client:
        assert client.get("/").text == "<html>studio</html>"
        assert client.get("/assets/app.js").text == "console.log('hi')"
        assert client.get("/projects/42/edit").text == "<html>studio</html>"  # SPA route
        assert client.get("/leak.txt").text == "<html>studio</html>"  # a link out of the root
        assert client.get("/%2e%2e/secret.txt").text == "<html>studio</html>"
        assert client.get("/v1/health").json()["ok"] is True
        missing = client.get("/v1/nothing")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
        assert client.post("/somewhere").status_code == 405
