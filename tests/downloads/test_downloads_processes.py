"""Downloads across real processes: a server killed with -9 mid-file resumes the file with a
range request when it starts again; `inline-core download` (the same manager, in its own process)
resumes after its own kill; a hub token is never logged or written down."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from download_support import write_blob
from fake_hub import FakeHub, Fault

from tests.server.server_support import LiveServer, wait_until

MB = 1024 * 1024
VAE = "split_files/vae/ae.safetensors"  # Z-Image's own target: the command downloads it by name
COMFY_REPO = "Comfy-Org/z_image_turbo"


@pytest.fixture
def blob(tmp_path: Path, hub: FakeHub) -> Path:
    made = write_blob(tmp_path / "src" / "ae.safetensors", 3 * MB + 5, seed=11)
    hub.add_repo(COMFY_REPO, {VAE: made})
    return made


def hub_env(tmp_path: Path, hub: FakeHub, **extra: str) -> dict[str, str]:
    return {"HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "hf-home"), **extra}


@pytest.fixture
def live(tmp_path: Path, hub: FakeHub) -> Iterator[LiveServer]:
    server = LiveServer(
        data_dir=tmp_path / "data",
        models_dir=tmp_path / "models",
        env=hub_env(tmp_path, hub, INLINE_MIN_FREE_DISK_MB="0"),
    )
    try:
        yield server
    finally:
        server.close()


def state(live: LiveServer, download_id: str) -> dict[str, Any]:
    response = httpx.get(f"{live.base}/v1/downloads/{download_id}", timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def wait_done(live: LiveServer, download_id: str) -> dict[str, Any]:
    def finished() -> dict[str, Any] | None:
        now = state(live, download_id)
        return now if now["status"] in ("done", "error", "cancelled") else None

    return wait_until(finished, f"download {download_id}", timeout=60)


def test_a_server_killed_mid_file_resumes_it_after_a_restart(
    live: LiveServer, hub: FakeHub, blob: Path, tmp_path: Path
) -> None:
    fault = hub.faults[VAE] = Fault(hold_at=MB)
    live.start()
    body = {"repo": COMFY_REPO, "files": [VAE], "category": "vae"}
    response = httpx.post(f"{live.base}/v1/downloads", json=body, timeout=30)
    assert response.status_code == 201, response.text
    download_id = response.json()["downloadId"]
    assert fault.reached.wait(30)
    wait_until(
        lambda: True if state(live, download_id)["bytesDone"] == MB else None, "the first MB"
    )
    live.kill9()
    fault.release.set()  # the hub's side of the dead connection ends
    live.start()
    done = wait_done(live, download_id)
    assert done["status"] == "done", done
    gets = [r.range for r in hub.requests("/cdn/") if r.method == "GET"]
    assert gets == [None, f"bytes={MB}-"]  # the second process took up the first one's bytes
    landed = tmp_path / "models" / "vae" / "ae.safetensors"
    assert (
        hashlib.sha256(landed.read_bytes()).hexdigest()
        == hashlib.sha256(blob.read_bytes()).hexdigest()
    )
    catalog = httpx.get(f"{live.base}/v1/models", timeout=30).json()["catalog"]["vae"]
    assert [e["name"] for e in catalog] == ["ae.safetensors"]


def test_the_hub_token_is_never_logged_or_stored(
    live: LiveServer, hub: FakeHub, tmp_path: Path
) -> None:
    secret = "hub-secret-token"  # the hub accepts it (conftest)
    hub.add_repo("org/gated", {"g.safetensors": write_blob(tmp_path / "g", MB, 12)}, gated=True)
    live.env.update(HF_TOKEN=secret)
    live.start()
    body = {"repo": "org/gated", "files": ["g.safetensors"], "category": "loras"}
    response = httpx.post(f"{live.base}/v1/downloads", json=body, timeout=30)
    assert response.status_code == 201, response.text
    done = wait_done(live, response.json()["downloadId"])
    assert done["status"] == "done", done
    assert all(r.with_token for r in hub.requests("/resolve/"))
    listed = httpx.get(f"{live.base}/v1/downloads", timeout=30).text
    live.stop(signal.SIGTERM)
    assert secret not in live.logs() and secret not in listed
    for path in tmp_path.joinpath("models").rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    for path in tmp_path.joinpath("data").rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def test_the_command_resumes_what_its_killed_run_left(
    hub: FakeHub, blob: Path, tmp_path: Path
) -> None:
    models = tmp_path / "models"
    env = {**os.environ, **hub_env(tmp_path, hub)}
    command = [sys.executable, "-m", "inline_core.cli", "download", "--models", str(models), "vae"]
    fault = hub.faults[VAE] = Fault(hold_at=MB)
    first = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert fault.reached.wait(60), first.stderr.read() if first.stderr else ""
        partial = next(iter((models / "vae" / ".downloads").rglob("*.partial")))
        wait_until(lambda: True if partial.stat().st_size == MB else None, "the first MB")
        first.send_signal(signal.SIGKILL)
        first.wait(30)
    finally:
        if first.poll() is None:
            first.kill()
    fault.release.set()
    second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    assert "-> vae/ae.safetensors" in second.stdout
    assert "100.0%" in second.stderr  # the progress bar (a line a tenth, off a terminal)
    assert [r.range for r in hub.requests("/cdn/") if r.method == "GET"] == [None, f"bytes={MB}-"]
    assert (models / "vae" / "ae.safetensors").read_bytes() == blob.read_bytes()
