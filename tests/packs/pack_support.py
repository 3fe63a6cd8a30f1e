"""Helpers for the pack tests: the `inline-core packs` command, a server that serves packs, and
graphs that feed an uploaded image through pack and built-in nodes."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Generator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from PIL import Image

from inline_core.packs.scratch import scratch_root
from tests.server.server_support import FINISHED, LiveServer, running_server, wait_until

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
# Installed once per test session into a shared packs folder (conftest's `packs_home`).
SHARED_PACKS = ("pillow10", "pillow11", "faults", "segv", "hang")
CLI_TIMEOUT_S = 900  # a liveness bound for building an environment, not a timing assertion


def packs_cli(
    packs_dir: Path, *args: str, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`inline-core packs ARGS` against `packs_dir`, as a user runs it."""
    full_env = {**os.environ, "INLINE_PACKS_DIR": str(packs_dir), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "inline_core.cli", "packs", *args],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )


def install(packs_dir: Path, pack: str | Path, env: Mapping[str, str] | None = None) -> str:
    """Install a fixture pack (by name) or a pack folder; its output. Fails the test on refusal."""
    path = FIXTURES / pack if isinstance(pack, str) else pack
    done = packs_cli(packs_dir, "install", str(path), env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


@contextmanager
def pack_server(
    root: Path, packs_dir: Path, env: Mapping[str, str] | None = None
) -> Generator[LiveServer]:
    # Its own scratch root, outside the server's folders (a worker must not see those), so no
    # other server starting on this machine sweeps what this test looks at.
    scratch = Path(tempfile.mkdtemp(prefix="inline-test-scratch-", dir=scratch_root()))
    own = {"INLINE_PACKS_DIR": str(packs_dir), "INLINE_PACK_SCRATCH_DIR": str(scratch)}
    try:
        with running_server(root, {**own, **(env or {})}) as live:
            yield live
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def upload_image(live: LiveServer, image: Image.Image) -> str:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    response = httpx.post(
        live.base + "/v1/assets",
        content=buf.getvalue(),
        headers={"content-type": "image/png"},
        timeout=10,
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def chain_graph(asset: str | None, *steps: tuple[str, Mapping[str, Any]]) -> dict[str, Any]:
    """`input/image` (when `asset`) then each (type, params) fed the previous node's first image
    output; node ids are n1, n2, ... (the last is the target)."""
    nodes: list[dict[str, Any]] = []
    previous: str | None = None
    if asset is not None:
        ref = {"ref": "asset", "id": asset}
        nodes.append({"id": "src", "type": "input/image", "params": {"asset": ref}})
        previous = "src"
    for i, (node_type, params) in enumerate(steps, start=1):
        node: dict[str, Any] = {"id": f"n{i}", "type": node_type, "params": dict(params)}
        if previous is not None:
            node["inputs"] = {"image": {"from": previous, "output": "image"}}
        nodes.append(node)
        previous = f"n{i}"
    return {"schemaVersion": 1, "nodes": nodes}


def submit(live: LiveServer, graph: Mapping[str, Any], target: str) -> httpx.Response:
    return httpx.post(live.base + "/v1/runs", json={"graph": graph, "target": target}, timeout=10)


def start_run(live: LiveServer, graph: Mapping[str, Any], target: str) -> str:
    response = submit(live, graph, target)
    assert response.status_code == 201, response.text
    return str(response.json()["runId"])


def run_state(live: LiveServer, run_id: str) -> dict[str, Any]:
    response = httpx.get(f"{live.base}/v1/runs/{run_id}", timeout=10)
    assert response.status_code == 200, response.text
    return response.json()


def finished(live: LiveServer, run_id: str, timeout: float = 60.0) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        state = run_state(live, run_id)
        return state if state["status"] in FINISHED else None

    return wait_until(probe, f"run {run_id} to finish", timeout=timeout, interval=0.05)


def run_to_end(live: LiveServer, graph: Mapping[str, Any], target: str) -> dict[str, Any]:
    return finished(live, start_run(live, graph, target))


def take_image(live: LiveServer, take: Mapping[str, Any]) -> Image.Image:
    response = httpx.get(live.base + str(take["uri"]), timeout=10)
    assert response.status_code == 200
    with Image.open(io.BytesIO(response.content)) as image:
        image.load()
        return image.copy()


def mask_bytes(live: LiveServer, take: Mapping[str, Any]) -> bytes:
    """The bytes a dependency-free test node wrote as a one-row mask."""
    return take_image(live, take).tobytes()


def mask_json(live: LiveServer, take: Mapping[str, Any]) -> dict[str, Any]:
    return json.loads(mask_bytes(live, take))


def packs_listing(live: LiveServer) -> dict[str, dict[str, Any]]:
    response = httpx.get(live.base + "/v1/packs", timeout=10)
    assert response.status_code == 200, response.text
    return {p["name"]: p for p in response.json()["packs"]}


def pack_failure(state: Mapping[str, Any]) -> str:
    """The message of a run that ended in error (it must have)."""
    assert state["status"] == "error", state
    return str(state["error"]["message"])


def logged_failure(live: LiveServer, state: Mapping[str, Any]) -> str:
    """`pack_failure`, once the server's log has said it too, with the run id."""
    message = pack_failure(state)
    error = state["error"]
    line = f"run {state['runId']} failed at node {error['nodeId']!r} ({error['code']}): "
    assert line + message.splitlines()[0] in live.logs(), live.log()
    return message


def gradient(size: int = 16) -> Image.Image:
    """An RGB image whose every pixel differs, so flips and inversions are visible."""
    image = Image.new("RGB", (size, size))
    image.putdata([(x * 7 % 256, y * 11 % 256, (x + y) * 5 % 256) for y in range(size)
                   for x in range(size)])
    return image
