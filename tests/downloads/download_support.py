"""Helpers of the download tests: no hub token, a server's config on a local hub, files of known
bytes, waiting on a download, its events."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from inline_core.config import Config

FINISHED = ("done", "error", "cancelled")


def without_hub_token(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    """No Hugging Face token to be found: none in the environment, the token files under `home`
    (empty), so a test never reaches a real account."""
    import huggingface_hub.constants as constants

    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(home / "token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(home / "stored_tokens"))


def hub_config(tmp_path: Path, hub_url: str, **extra: Any) -> Config:
    """A CPU server with empty models/ and data/ folders under `tmp_path` that downloads from the
    hub at `hub_url`, with no free-space floor (a test machine's disk may be nearly full)."""
    return Config(
        models_dir=tmp_path / "models",
        data_dir=tmp_path / "data",
        profile="cpu",
        min_free_disk_mb=0,
        hf_endpoint=hub_url,
        **extra,
    )


def write_blob(path: Path, size: int, seed: int) -> Path:
    """`size` bytes that are the same for the same seed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(random.Random(seed).randbytes(size))
    return path


def wait_status(
    client: TestClient,
    download_id: str,
    timeout: float = 60.0,
    until: Collection[str] = FINISHED,
) -> dict[str, Any]:
    """Poll until the download's status is one of `until`, by default finished (a liveness
    bound, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while True:
        state: dict[str, Any] = client.get(f"/v1/downloads/{download_id}").json()
        if state["status"] in until:
            return state
        assert time.monotonic() < deadline, f"download {download_id} stuck: {state}"
        time.sleep(0.02)


def download_done(client: TestClient, source: dict[str, Any]) -> dict[str, Any]:
    """A requirement's hub `source` posted as a download and waited on until it is done."""
    posted = client.post("/v1/downloads", json=source["download"])
    assert posted.status_code == 201, posted.text
    state = wait_status(client, str(posted.json()["downloadId"]), timeout=120)
    assert state["status"] == "done", state
    return state


def socket_events(client: TestClient, download_id: str) -> list[dict[str, Any]]:
    """Every message of the download's event socket, until the server closes it."""
    messages: list[dict[str, Any]] = []
    with client.websocket_connect(f"/v1/downloads/{download_id}/events") as ws:
        while True:
            try:
                messages.append(json.loads(ws.receive_text()))
            except Exception:  # the server closed the socket after the terminal event
                break
    return messages
