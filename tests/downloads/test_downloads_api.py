"""`/v1/downloads` through the ASGI app against the local hub: a full download into the catalog
(on both run stores), progress over the socket, a cut resumed by a range request, the hash check,
cancel, the disk-space refusal, the queue, gated repos, and every bad request's envelope."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from download_support import socket_events, wait_status, write_blob
from fake_hub import FakeHub, Fault
from fastapi.testclient import TestClient

from inline_core.config import Config
from inline_core.server.app import create_app

MB = 1024 * 1024
VAE = "split_files/vae/ae.safetensors"


@pytest.fixture
def vae_blob(tmp_path: Path, hub: FakeHub) -> Path:
    blob = write_blob(tmp_path / "src" / "ae.safetensors", 3 * MB + 17, seed=1)
    hub.add_repo("org/split", {VAE: blob, "README.md": write_blob(tmp_path / "r.md", 40, 2)})
    return blob


@pytest.fixture
def client(config: Config) -> Iterator[TestClient]:
    with TestClient(create_app(config)) as c:
        yield c


def wait_bytes(client: TestClient, download_id: str, held: int) -> dict[str, Any]:
    """Poll until the download holds `held` bytes (the client reads what the hub has sent)."""
    deadline = time.monotonic() + 30  # a liveness bound, not a timing assertion
    while (state := client.get(f"/v1/downloads/{download_id}").json())["bytesDone"] < held:
        assert time.monotonic() < deadline, state
        time.sleep(0.02)
    return state


def post(client: TestClient, **body: object) -> str:
    response = client.post("/v1/downloads", json=body)
    assert response.status_code == 201, response.text
    assert response.json()["status"] == "queued"
    return str(response.json()["downloadId"])


def test_a_folder_download_lands_verified_in_the_catalog(
    tmp_path: Path, hub: FakeHub, config: Config, database_url: str | None
) -> None:
    src = tmp_path / "repo"
    write_blob(src / "vae" / "diffusion_pytorch_model.safetensors", 2 * MB, seed=3)
    (src / "vae" / "config.json").write_text('{"latent_channels": 16}')
    (src / "model_index.json").write_text('{"_class_name": "ZImagePipeline"}')
    write_blob(src / "assets" / "picture.png", 1000, seed=4)
    hub.add_folder("org/pipe", src)
    with TestClient(create_app(replace(config, database_url=database_url))) as client:
        before = client.get("/v1/models").headers["etag"]
        download_id = post(
            client,
            repo="org/pipe",
            files=["model_index.json", "vae/*"],
            category="diffusion_models",
            folder="Pipe",
        )
        state = wait_status(client, download_id)
        assert state["status"] == "done", state
        asked = ("model_index.json", "vae/config.json", "vae/diffusion_pytorch_model.safetensors")
        size = sum((src / name).stat().st_size for name in asked)
        assert state["bytesDone"] == state["bytesTotal"] == size
        assert state["destinations"] == ["diffusion_models/Pipe"]
        assert sorted(f["dest"] for f in state["files"]) == [
            "model_index.json",
            "vae/config.json",
            "vae/diffusion_pytorch_model.safetensors",
        ]
        assert all(f["verified"] for f in state["files"])
        landed = config.models_dir / "diffusion_models" / "Pipe"
        for name in asked:
            assert (landed / name).read_bytes() == (src / name).read_bytes()
        assert not (landed / "assets").exists()  # not asked for
        catalog = client.get("/v1/models").json()["catalog"]["diffusion_models"]
        assert [e["name"] for e in catalog] == ["Pipe"]
        assert client.get("/v1/models").headers["etag"] != before
        listed = client.get("/v1/downloads").json()["downloads"]
        assert [d["downloadId"] for d in listed] == [download_id]
        assert listed[0]["commit"] == hub.repos["org/pipe"].commit
        # The weights came through the CDN redirect, the json straight from the resolve route.
        assert hub.requests("/cdn/") and hub.requests("/resolve/")


def test_progress_streams_over_the_socket(client: TestClient, hub: FakeHub, vae_blob: Path) -> None:
    hub.faults[VAE] = Fault(slow_chunk=256 * 1024, slow_delay_s=0.02)
    download_id = post(client, repo="org/split", files=[VAE], category="vae")
    events = socket_events(client, download_id)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "snapshot" and kinds[-1] == "download_done", kinds
    assert "file_done" in kinds and "progress" in kinds
    progress = [e for e in events if e["type"] == "progress"]
    done = [e["bytesDone"] for e in progress]
    assert done == sorted(done) and all(
        e["bytesTotal"] == vae_blob.stat().st_size for e in progress
    )
    assert events[-1]["download"]["bytesDone"] == vae_blob.stat().st_size
    finished = client.get(f"/v1/downloads/{download_id}/events")
    assert finished.status_code in (400, 404, 405)  # a socket route; plain GET is not it
    late = socket_events(client, download_id)  # a socket opened after the end: snapshot, end
    assert [e["type"] for e in late] == ["snapshot", "download_done"]


def test_a_cut_connection_resumes_with_a_range_request(
    client: TestClient, hub: FakeHub, config: Config, vae_blob: Path
) -> None:
    hub.faults[VAE] = Fault(cut_at=1 * MB, cuts=2)
    state = wait_status(client, post(client, repo="org/split", files=[VAE], category="vae"))
    assert state["status"] == "done", state
    gets = [r for r in hub.requests("/cdn/") if r.method == "GET"]
    # Cut at 1 MB, then cut again before a byte: each try resumes where the bytes stopped.
    assert [r.range for r in gets] == [None, f"bytes={MB}-", f"bytes={MB}-"]
    oid = hub.repos["org/split"].files[VAE].sha256
    assert [r.if_range for r in gets[1:]] == [f'"{oid}"'] * 2  # only the same file resumes
    landed = config.models_dir / "vae" / "ae.safetensors"
    assert hashlib.sha256(landed.read_bytes()).hexdigest() == oid


def test_a_running_download_shows_its_bytes_rate_and_eta_and_no_partial_is_listed(
    client: TestClient, hub: FakeHub, config: Config, vae_blob: Path
) -> None:
    fault = hub.faults[VAE] = Fault(hold_at=MB)
    download_id = post(client, repo="org/split", files=[VAE], category="vae")
    assert fault.reached.wait(30)
    state = wait_bytes(client, download_id, MB)
    size = vae_blob.stat().st_size
    assert state["status"] == "running"
    assert state["bytesDone"] == MB and state["bytesTotal"] == size
    [file] = state["files"]
    assert (file["path"], file["dest"]) == (VAE, "ae.safetensors")
    assert (file["bytesDone"], file["bytesTotal"], file["verified"]) == (MB, size, False)
    assert state["rate"] > 0 and state["etaS"] is not None
    listed = client.get("/v1/downloads").json()["downloads"]
    assert [d["status"] for d in listed] == ["running"]
    partial = config.models_dir / "vae" / ".downloads" / download_id / "ae.safetensors.partial"
    assert partial.stat().st_size == MB
    before = client.get("/v1/models")
    assert before.json()["catalog"]["vae"] == []  # a partial file is never in the catalog
    fault.release.set()
    assert wait_status(client, download_id)["status"] == "done"
    after = client.get("/v1/models")
    assert [e["name"] for e in after.json()["catalog"]["vae"]] == ["ae.safetensors"]
    assert after.headers["etag"] != before.headers["etag"]


def test_a_file_gone_from_the_hub_mid_download_is_a_404_naming_it(
    client: TestClient, hub: FakeHub, config: Config, vae_blob: Path
) -> None:
    fault = hub.faults[VAE] = Fault(hold_at=MB, cut_at=MB)
    download_id = post(client, repo="org/split", files=[VAE], category="vae")
    assert fault.reached.wait(30)
    del hub.repos["org/split"].files[VAE]  # the resume after the cut finds no such file
    fault.release.set()
    state = wait_status(client, download_id)
    assert state["status"] == "error", state
    assert state["error"]["code"] == "not_found" and VAE in state["error"]["message"]
    assert [r.range for r in hub.requests("/resolve/") if r.method == "GET"][-1] == f"bytes={MB}-"
    assert list((config.models_dir / "vae" / ".downloads").iterdir()) == []
    assert not (config.models_dir / "vae" / "ae.safetensors").exists()


def test_wrong_bytes_fail_the_hash_check_and_are_discarded(
    client: TestClient, hub: FakeHub, config: Config, vae_blob: Path
) -> None:
    hub.faults[VAE] = Fault(corrupt=True)
    download_id = post(client, repo="org/split", files=[VAE], category="vae")
    state = wait_status(client, download_id)
    assert state["status"] == "error"
    assert state["error"]["code"] == "verify_failed" and VAE in state["error"]["message"]
    vae = config.models_dir / "vae"
    assert sorted(p.name for p in vae.iterdir()) == [".downloads"]
    assert list((vae / ".downloads").iterdir()) == []  # the partial bytes are gone
    assert client.get("/v1/models").json()["catalog"]["vae"] == []


def test_cancel_stops_a_running_download_and_removes_its_partial(
    client: TestClient, hub: FakeHub, config: Config, vae_blob: Path
) -> None:
    fault = hub.faults[VAE] = Fault(hold_at=MB)
    download_id = post(client, repo="org/split", files=[VAE], category="vae")
    assert fault.reached.wait(30)
    staging = config.models_dir / "vae" / ".downloads" / download_id
    partial = staging / "ae.safetensors.partial"
    assert partial.is_file()
    cancelled = client.delete(f"/v1/downloads/{download_id}")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert not staging.exists()
    again = client.delete(f"/v1/downloads/{download_id}")
    assert again.status_code == 409 and again.json()["error"]["code"] == "conflict"
    fault.release.set()
    assert not (config.models_dir / "vae" / "ae.safetensors").exists()


def test_downloads_beyond_the_limit_queue(
    hub: FakeHub, config: Config, tmp_path: Path, vae_blob: Path
) -> None:
    other = write_blob(tmp_path / "src" / "te.safetensors", MB, seed=5)
    hub.add_repo("org/te", {"te.safetensors": other})
    fault = hub.faults[VAE] = Fault(hold_at=MB)
    with TestClient(create_app(replace(config, max_downloads=1))) as client:
        first = post(client, repo="org/split", files=[VAE], category="vae")
        assert fault.reached.wait(30)
        second = post(client, repo="org/te", files=["te.safetensors"], category="text_encoders")
        assert client.get(f"/v1/downloads/{second}").json()["status"] == "queued"
        assert client.get(f"/v1/downloads/{first}").json()["status"] == "running"
        fault.release.set()
        assert wait_status(client, first)["status"] == "done"
        assert wait_status(client, second)["status"] == "done"


def test_a_restart_resumes_what_ran_and_queues_what_no_longer_fits(
    hub: FakeHub, config: Config, tmp_path: Path, vae_blob: Path
) -> None:
    other = write_blob(tmp_path / "src" / "te.safetensors", 2 * MB, seed=8)
    hub.add_repo("org/te", {"te.safetensors": other})
    vae_hold = hub.faults[VAE] = Fault(hold_at=MB)
    te_hold = hub.faults["te.safetensors"] = Fault(hold_at=MB)
    with TestClient(create_app(config)) as client:  # two at once
        first = post(client, repo="org/split", files=[VAE], category="vae")
        second = post(client, repo="org/te", files=["te.safetensors"], category="text_encoders")
        assert vae_hold.reached.wait(30) and te_hold.reached.wait(30)
        for download_id in (first, second):
            wait_bytes(client, download_id, MB)
    # Stopped mid-file; started again with room for one: the other waits its turn.
    with TestClient(create_app(replace(config, max_downloads=1))) as client:
        # Resumed in the order they came (its worker may not have picked it up at start-up).
        assert wait_status(client, first, until={"running"})["status"] == "running"
        assert client.get(f"/v1/downloads/{second}").json()["status"] == "queued"
        vae_hold.release.set()
        te_hold.release.set()
        assert wait_status(client, first)["status"] == "done"
        assert wait_status(client, second)["status"] == "done"
    resumed = [r.range for r in hub.requests("/cdn/") if r.method == "GET" and r.range]
    assert sorted(resumed) == [f"bytes={MB}-"] * 2  # each resumed from its partial file
    landed = config.models_dir / "text_encoders" / "te.safetensors"
    assert landed.read_bytes() == other.read_bytes()


def test_not_enough_disk_is_refused_before_anything_starts(
    client: TestClient, hub: FakeHub, config: Config, vae_blob: Path
) -> None:
    hub.listed_sizes[VAE] = 10**16  # ten petabytes: no test machine has them free
    response = client.post(
        "/v1/downloads", json={"repo": "org/split", "files": [VAE], "category": "vae"}
    )
    assert response.status_code == 507
    error = response.json()["error"]
    assert error["code"] == "insufficient_storage" and "needs 8.9 PiB in " in error["message"]
    assert client.get("/v1/downloads").json()["downloads"] == []
    assert not hub.requests("/cdn/")


def test_a_gated_repo_needs_the_hub_token(
    client: TestClient, hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blob = write_blob(tmp_path / "src" / "g.safetensors", MB, seed=6)
    hub.add_repo("org/gated", {"g.safetensors": blob}, gated=True)
    body = {"repo": "org/gated", "files": ["g.safetensors"], "category": "loras"}
    refused = client.post("/v1/downloads", json=body)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "hub_access_denied"
    assert "HF_TOKEN" in refused.json()["error"]["message"]
    # A token the hub does not accept: the hub's 401 ends the download, saying why.
    monkeypatch.setenv("HF_TOKEN", "not-the-hub-token")
    state = wait_status(client, post(client, **body))
    assert state["status"] == "error" and state["error"]["code"] == "hub_access_denied"
    assert "not-the-hub-token" not in str(state)
    monkeypatch.setenv("HF_TOKEN", "hub-secret-token")
    state = wait_status(client, post(client, **body))
    assert state["status"] == "done", state
    assert all(r.with_token for r in hub.requests("/resolve/"))
    assert not any(r.with_token for r in hub.requests("/cdn/"))  # never to another origin
    records = (tmp_path / "models" / ".downloads").glob("*.json")
    assert all("hub-secret-token" not in p.read_text() for p in records)


def test_the_hub_token_can_come_from_the_standard_token_file(
    client: TestClient, hub: FakeHub, tmp_path: Path
) -> None:
    import huggingface_hub.constants as constants

    blob = write_blob(tmp_path / "src" / "g.safetensors", MB, seed=7)
    hub.add_repo("org/gated", {"g.safetensors": blob}, gated=True)
    token_file = Path(constants.HF_TOKEN_PATH)  # where `hf auth login` writes it (this test's)
    token_file.parent.mkdir(parents=True, exist_ok=True)
    token_file.write_text("hub-secret-token\n")
    body = {"repo": "org/gated", "files": ["g.safetensors"], "category": "loras"}
    state = wait_status(client, post(client, **body))
    assert state["status"] == "done", state
    assert all(r.with_token for r in hub.requests("/resolve/"))
    assert "hub-secret-token" not in client.get("/v1/downloads").text


@pytest.mark.parametrize(
    ("body", "status", "code", "says"),
    [
        ({"repo": "org/none", "files": ["x.bin"], "category": "vae"}, 404, "not_found", "org/none"),
        (
            {"repo": "org/split", "files": ["nope.bin"], "category": "vae"},
            404,
            "not_found",
            "nope.bin",
        ),
        (
            {"repo": "org/split", "files": [VAE], "category": "vae", "revision": "v9"},
            404,
            "not_found",
            "revision",
        ),
        (
            {"repo": "org/split", "files": [VAE], "category": "weights"},
            422,
            "invalid_request",
            "category",
        ),
        ({"repo": "org/split", "files": [], "category": "vae"}, 422, "invalid_request", "files"),
        (
            {"repo": "org/split", "files": ["../x"], "category": "vae"},
            422,
            "invalid_request",
            "../x",
        ),
        (
            {"repo": "org/split", "files": [VAE], "category": "vae", "folder": "../up"},
            422,
            "invalid_request",
            "folder",
        ),
        ({"repo": "org/split", "category": "vae"}, 422, "invalid_request", "files"),
        ({"files": [VAE], "category": "vae"}, 422, "invalid_request", "repo"),
        (
            {"repo": "org/split", "files": [VAE], "category": "vae", "token": "x"},
            422,
            "invalid_request",
            "token",
        ),
    ],
)
def test_bad_requests_get_an_envelope(
    client: TestClient,
    vae_blob: Path,
    body: dict[str, object],
    status: int,
    code: str,
    says: str,
) -> None:
    response = client.post("/v1/downloads", json=body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code and says in error["message"]


def test_already_present_or_already_coming_is_a_conflict(
    client: TestClient, hub: FakeHub, config: Config, vae_blob: Path
) -> None:
    fault = hub.faults[VAE] = Fault(hold_at=MB)
    body = {"repo": "org/split", "files": [VAE], "category": "vae"}
    first = post(client, **body)
    coming = client.post("/v1/downloads", json=body)
    assert coming.status_code == 409 and first in coming.json()["error"]["message"]
    fault.release.set()
    assert wait_status(client, first)["status"] == "done"
    present = client.post("/v1/downloads", json=body)
    assert present.status_code == 409 and "vae/ae.safetensors" in present.json()["error"]["message"]
    assert client.get("/v1/downloads/dl_nope").json()["error"]["code"] == "not_found"
    assert client.get("/v1/downloads?limit=0").status_code == 422
    text = client.post("/v1/downloads", content=b"{}", headers={"content-type": "text/plain"})
    assert text.status_code == 415


def test_downloads_need_the_api_token_like_every_route(config: Config, vae_blob: Path) -> None:
    with TestClient(create_app(replace(config, api_token="tok-1"))) as client:
        body = {"repo": "org/split", "files": [VAE], "category": "vae"}
        assert client.post("/v1/downloads", json=body).status_code == 401
        assert client.get("/v1/downloads").status_code == 401
        authed = client.get("/v1/downloads", headers={"Authorization": "Bearer tok-1"})
        assert authed.status_code == 200
