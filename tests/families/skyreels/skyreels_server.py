"""Shared helpers for the SkyReels-V2 tests against a real server: a server holding renders
inside a chunk, the long render's graph, its submission, its take and the take's frames."""

from __future__ import annotations

import json
import shutil
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from skyreels_harness import LONG
from skyreels_hold import hold_env
from websockets.sync.client import ClientConnection, connect

from inline_core.families.skyreels.descriptor import NODE_TYPE
from inline_core.families.skyreels.kit import FOLDER, SkyReelsKit
from inline_core.runtime.video import decode_apng
from tests.server.server_support import LiveServer, post_run, prompt_graph, running_server

RENDER: dict[str, Any] = {
    "width": 48,
    "height": 32,
    "steps": 2,
    "seed": 3,
    "guidance": 1.0,
    "format": "png",
    "model": FOLDER,
    **LONG,
}
CHANGE = {"prompt": "a red kite over the sea"}
# LONG's chunks: chunk 0 renders latent frames 0-2 (9 frames), each later one adds 4 frames.
FIRST_CHUNK_FRAMES = 9
CHUNK_FIRST_FRAMES = (0, 9, 13, 17)


@contextmanager
def held_server(kit: SkyReelsKit, tmp_path: Path) -> Generator[tuple[LiveServer, Path]]:
    """A real server on a copy of the kit's models, its renders held inside chunk 0 while the
    hold file (yielded with it) names that chunk."""
    shutil.copytree(kit.root, tmp_path / "models")
    hold = tmp_path / "hold"
    hold.write_text("0")
    with running_server(tmp_path, env=hold_env(hold)) as live:
        yield live, hold


def graph(seed: int = RENDER["seed"]) -> dict[str, Any]:
    """The long render's graph (another seed: another render, not answered from the node cache
    of a server that rendered the first)."""
    return prompt_graph(NODE_TYPE, "s", {**RENDER, "seed": seed}, "a lighthouse in a storm")


def submit(live: LiveServer, g: dict[str, Any]) -> str:
    response = post_run(live, g, "s")
    assert response.status_code == 201, response.text
    return str(response.json()["runId"])


def interact(live: LiveServer, run_id: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{live.base}/v1/runs/{run_id}/interactions", json=body, timeout=30)


def take(live: LiveServer, state: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
    [found] = state["takes"]
    data = httpx.get(live.base + found["uri"], timeout=30).content
    return data, found


def frames(data: bytes) -> np.ndarray[Any, np.dtype[np.int16]]:
    return decode_apng(data).astype(np.int16)


def next_event(ws: ClientConnection) -> dict[str, Any]:
    return dict(json.loads(ws.recv(timeout=120)))


def until_chunk(ws: ClientConnection, chunk: int) -> dict[str, Any]:
    """Read events until `chunk` starts (the render is held inside it)."""
    while True:
        event = next_event(ws)
        assert event["type"] not in ("run_done", "error", "cancelled"), event
        if event["type"] == "chunk_started" and event["chunk"] == chunk:
            return event


@contextmanager
def held_run_socket(
    live: LiveServer, hold: Path, seed: int = RENDER["seed"]
) -> Generator[tuple[str, ClientConnection]]:
    """On a `held_server`, the long render of `seed` submitted and held inside chunk 0, its
    events socket open past the snapshot: the run and the socket. The hold is lifted after."""
    hold.write_text("0")
    try:
        run_id = submit(live, graph(seed))
        with connect(f"{live.ws_base}/v1/runs/{run_id}/events", open_timeout=30) as ws:
            assert next_event(ws)["type"] == "snapshot"
            until_chunk(ws, 0)
            yield run_id, ws
    finally:
        hold.unlink(missing_ok=True)
