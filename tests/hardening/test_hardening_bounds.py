"""Bounds and roots beyond the corpus: pixel limits when an image is opened, links in models/,
the frontend root, Retry-After on 503, the web-page guards, and structures that must not grow."""

from __future__ import annotations

import io
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest
from fastapi.testclient import TestClient
from PIL import Image

from inline_core.config import Config
from inline_core.models.catalog import Catalog
from inline_core.server.access import LoopbackHostGate
from inline_core.server.app import create_app
from inline_core.server.bootstrap import Services, build_services
from inline_core.server.memory import HeapTrimmer
from inline_core.server.stores.sqlite import SqliteBackend
from tests.server.server_support import PLUGIN, wait_until
from tests.server.store_support import open_store


@pytest.fixture
def config(tmp_path: Path) -> Config:
    return Config(
        models_dir=tmp_path / "models",
        data_dir=tmp_path / "data",
        profile="cpu",
        dtype="float32",
        plugins=(PLUGIN, "hardening_nodes:register"),
        run_workers=2,
    )


def png(size: tuple[int, int]) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, (9, 9, 9)).save(buf, format="PNG")
    return buf.getvalue()


def image_graph(asset_id: str) -> dict[str, Any]:
    ref = {"ref": "asset", "id": asset_id}
    return {"nodes": [{"id": "i", "type": "input/image", "params": {"asset": ref}}]}


def services_of(client: TestClient) -> Services:
    return cast(Services, cast(Any, client.app).state.services)


def test_an_image_over_a_lowered_pixel_limit_is_refused_when_a_graph_opens_it(
    config: Config,
) -> None:
    with TestClient(create_app(config)) as client:
        upload = client.post(
            "/v1/assets", content=png((120, 100)), headers={"content-type": "image/png"}
        )
        assert upload.status_code == 201
        asset_id = upload.json()["id"]
    # The operator lowers the limit; the stored asset is now over it.
    with TestClient(create_app(replace(config, max_image_pixels=10_000))) as client:
        refused = client.post("/v1/runs", json={"graph": image_graph(asset_id), "target": "i"})
        assert refused.status_code == 413, refused.text
        assert refused.json()["error"]["code"] == "payload_too_large"
        assert "12000 pixels" in refused.json()["error"]["message"]
        small = client.post(
            "/v1/assets", content=png((100, 100)), headers={"content-type": "image/png"}
        )
        assert small.status_code == 201  # exactly at the limit is allowed
        accepted = client.post(
            "/v1/runs", json={"graph": image_graph(small.json()["id"]), "target": "i"}
        )
        assert accepted.status_code == 201, accepted.text


def test_catalog_lists_nothing_that_leaves_models_and_survives_broken_links(tmp_path: Path) -> None:
    models = tmp_path / "models"
    folder = models / "diffusion_models"
    folder.mkdir(parents=True)
    (folder / "real.safetensors").write_bytes(b"w")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.safetensors").write_bytes(b"s")
    os.symlink(outside / "secret.safetensors", folder / "link-out.safetensors")
    os.symlink(tmp_path / "missing.safetensors", folder / "broken.safetensors")
    os.symlink(folder / "loop-b.safetensors", folder / "loop-a.safetensors")
    os.symlink(folder / "loop-a.safetensors", folder / "loop-b.safetensors")
    os.symlink(outside, folder / "dir-out")
    os.symlink(folder, folder / "self")  # a folder that contains itself
    (folder / "inside-link.safetensors").symlink_to(folder / "real.safetensors")
    # A model folder (diffusers layout) with one file linked out of models/.
    snapshot = folder / "snapshot"
    snapshot.mkdir()
    (snapshot / "model_index.json").write_text("{}")
    os.symlink(outside / "secret.safetensors", snapshot / "weights.safetensors")
    clean = folder / "clean"
    clean.mkdir()
    (clean / "model_index.json").write_text("{}")

    catalog = Catalog(models)
    assert catalog.options("diffusion_models") == [
        "clean",
        "inside-link.safetensors",
        "real.safetensors",
    ]


def test_the_frontend_root_is_never_left(config: Config, tmp_path: Path) -> None:
    root = tmp_path / "front"
    root.mkdir()
    (root / "index.html").write_text("<html>app</html>")
    (tmp_path / "secret.txt").write_text("secret")
    os.symlink(root / "loop", root / "loop")
    os.symlink(tmp_path, root / "up")
    with TestClient(create_app(replace(config, frontend_root=root))) as client:
        for path in (
            "/%2e%2e/secret.txt",
            "/..%2Fsecret.txt",
            "//etc/passwd",
            "/loop",
            "/up/secret.txt",
            "/%00",
            "/index.html%00.txt",
        ):
            response = client.get(path)
            assert "secret" not in response.text and "root:" not in response.text, path
            assert response.status_code in (200, 404), path


def test_a_503_while_stopping_carries_retry_after(config: Config) -> None:
    services = build_services(config)
    with TestClient(create_app(config, services)) as client:
        services.manager.shutdown(timeout=1.0)
        response = client.post(
            "/v1/runs",
            json={"graph": {"nodes": [{"id": "t", "type": "input/text"}]}, "target": "t"},
        )
        assert response.status_code == 503
        assert response.json()["error"]["code"] == "unavailable"
        assert int(response.headers["retry-after"]) >= 1


def test_web_pages_need_an_allowed_origin_but_other_clients_do_not(config: Config) -> None:
    allowed = replace(config, cors_origins=("http://studio.local",))
    graph = {"graph": {"nodes": [{"id": "t", "type": "input/text"}]}, "target": "t"}
    with TestClient(create_app(allowed), base_url="http://127.0.0.1:8848") as client:
        assert client.post("/v1/runs", json=graph).status_code == 201  # no Origin: not a page
        studio = {"origin": "http://studio.local"}
        assert client.post("/v1/runs", json=graph, headers=studio).status_code == 201
        same = {"origin": "http://127.0.0.1:8848"}  # the server's own frontend
        assert client.post("/v1/runs", json=graph, headers=same).status_code == 201
        evil = {"origin": "http://127.0.0.1:9999"}  # another port is another origin
        assert client.post("/v1/runs", json=graph, headers=evil).status_code == 403
        assert client.get("/v1/health", headers=evil).status_code == 200  # health stays open
    # With a token the token decides, whatever the origin.
    guarded = replace(config, api_token="tok")
    with TestClient(create_app(guarded)) as client:
        headers = {"origin": "https://elsewhere.example", "authorization": "Bearer tok"}
        assert client.post("/v1/runs", json=graph, headers=headers).status_code == 201


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("127.0.0.1:8848", 200),
        ("localhost:8848", 200),
        ("[::1]:8848", 200),
        ("LOCALHOST", 200),
        ("evil.example:8848", 403),  # a DNS-rebinding page's own name
        ("127.0.0.1.evil.example", 403),
        ("localhost.evil.example:8848", 403),
    ],
)
def test_the_loopback_host_gate_refuses_other_names(config: Config, host: str, status: int) -> None:
    app = create_app(config)
    app.add_middleware(LoopbackHostGate, extra_names=("127.0.0.1",))
    with TestClient(app, base_url="http://127.0.0.1:8848") as client:
        response = client.get("/v1/runs", headers={"host": host})
        assert response.status_code == status
        if status == 403:
            assert response.json()["error"]["code"] == "forbidden"


def test_finished_runs_leave_nothing_behind_in_memory(config: Config) -> None:
    with TestClient(create_app(config)) as client:
        services = services_of(client)
        ids: list[str] = []
        for i in range(60):
            graph = {"nodes": [{"id": "t", "type": "input/text", "params": {"text": str(i)}}]}
            ids.append(
                client.post("/v1/runs", json={"graph": graph, "target": "t"}).json()["runId"]
            )
        for run_id in ids:
            with client.websocket_connect(f"/v1/runs/{run_id}/events") as ws:
                while ws.receive_json()["type"] not in ("run_done", "error", "cancelled"):
                    pass
        wait_until(lambda: services.manager.live_count() == 0 or None, "runs to be dropped")
        assert services.manager.stats() == {"queued": 0, "running": 0}


def test_read_connections_of_ended_threads_are_closed(tmp_path: Path) -> None:
    store = open_store(tmp_path, None)
    backend = store.backend
    assert isinstance(backend, SqliteBackend)
    try:
        for _ in range(30):  # a thread pool retiring and replacing its workers
            thread = threading.Thread(target=lambda: store.get_run("run_x"))
            thread.start()
            thread.join()
        store.get_run("run_x")
        assert backend.reader_count() <= 2  # this thread's, and at most the last ended one's
    finally:
        store.close()


def test_temp_files_a_crash_left_are_swept_at_start(config: Config) -> None:
    config.takes_dir.mkdir(parents=True)
    config.assets_dir.mkdir(parents=True)
    (config.takes_dir / ".tmp-abc.png").write_bytes(b"half a take")
    (config.assets_dir / ".upload-xyz").write_bytes(b"half an upload")
    (config.takes_dir / "tk_kept.png").write_bytes(b"a take")
    with TestClient(create_app(config)):
        pass
    assert sorted(p.name for p in config.takes_dir.iterdir()) == ["tk_kept.png"]
    assert list(config.assets_dir.iterdir()) == []


def test_error_messages_never_echo_a_hostile_body_whole(config: Config) -> None:
    names = {("k" * 1000) + str(i): 1 for i in range(200)}
    body = {"graph": {"nodes": [{"id": "t", "type": "input/text", "params": names}]}, "target": "t"}
    with TestClient(create_app(config)) as client:
        response = client.post("/v1/runs", json=body)
    assert response.status_code == 422
    assert len(response.text) < 3000


@pytest.fixture
def streaming_client(config: Config) -> Iterator[TestClient]:
    with TestClient(create_app(replace(config, max_upload_mb=1))) as client:
        yield client


def test_a_bomb_streamed_without_a_length_is_refused_and_leaves_no_file(
    streaming_client: TestClient, config: Config
) -> None:
    from hardening_corpus import png_claiming

    def chunks() -> Iterator[bytes]:
        yield png_claiming(50_000, 50_000)

    response = streaming_client.post(
        "/v1/assets", content=chunks(), headers={"content-type": "image/png"}
    )
    assert response.status_code == 413
    assert list(config.assets_dir.iterdir()) == []


def test_the_heap_trimmer_runs_at_most_once_per_interval_while_busy() -> None:
    trimmer = HeapTrimmer(interval_s=3600.0)
    assert trimmer.maybe_trim() is False  # within the interval since start
    assert trimmer.trim_now() is trimmer.available  # glibc: trims; elsewhere: nothing to do
    assert trimmer.maybe_trim() is False
    assert trimmer.trims == (1 if trimmer.available else 0)
    assert HeapTrimmer(interval_s=0.0).maybe_trim() is trimmer.available


@pytest.mark.skipif(not HeapTrimmer().available, reason="malloc_trim is glibc's")
def test_an_idle_trim_waits_out_its_delay_and_a_run_starting_first_drops_it() -> None:
    waiting = HeapTrimmer(idle_delay_s=3600.0)
    waiting.went_idle()
    waiting.busy()  # the next run started within the delay
    waiting.close()
    assert waiting.trims == 0
    prompt = HeapTrimmer(idle_delay_s=0.0)
    prompt.went_idle()
    deadline = time.monotonic() + 30  # a liveness bound: the timer thread runs on a busy machine
    while prompt.trims == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert prompt.trims == 1
