"""A real server in its own process for the benches: a free port, its environment, its health.

Benches that time the server from outside start it here, so every one waits for `/v1/health`
the same way and a server that never answers stops the bench with its log's tail.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx


def free_port() -> int:
    """A port nothing listens on now (the OS picks it): benches never bind a fixed one."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ServerProcess:
    proc: subprocess.Popen[bytes]
    base: str  # http://127.0.0.1:<port>
    log: Path

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start_server(
    models: Path,
    data: Path,
    log: Path,
    *,
    env: dict[str, str] | None = None,
    src: Path | None = None,
    clean_env: bool = False,
    timeout_s: float = 120.0,
    prefix: list[str] | None = None,
) -> ServerProcess:
    """`python -m inline_core.server` on a free port with the CPU profile, logging into `log`.

    `src`: another checkout's `src/` to run instead of the installed package (A/B benches);
    `clean_env`: drop this shell's INLINE_* settings first; `env`: settings on top; `prefix`: a
    command the server runs under (`real_size.MemoryCage.prefix`: a memory cgroup).
    """
    port = free_port()
    full = {k: v for k, v in os.environ.items() if not (clean_env and k.startswith("INLINE_"))}
    full.update(
        INLINE_MODELS_DIR=str(models),
        INLINE_DATA_DIR=str(data),
        INLINE_PORT=str(port),
        INLINE_HOST="127.0.0.1",
        INLINE_PROFILE="cpu",
    )
    if src is not None:
        full["PYTHONPATH"] = str(src)
    full.update(env or {})
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*(prefix or []), sys.executable, "-m", "inline_core.server"],
            env=full,
            stdout=out,
            stderr=out,
        )
    server = ServerProcess(proc, f"http://127.0.0.1:{port}", log)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(server.base + "/v1/health", timeout=1).status_code == 200:
                return server
        except httpx.HTTPError:
            time.sleep(0.1)
    server.stop()
    raise SystemExit(f"the server did not start: {log.read_text(errors='replace')[-2000:]}")


def server_ms(server: ServerProcess, graph: dict[str, Any]) -> float:
    """`POST /v1/runs` until its websocket says `run_done` (the take written), in ms."""
    return server_run(server, graph)[0]


def server_run(server: ServerProcess, graph: dict[str, Any]) -> tuple[float, str]:
    """`server_ms` and the run's id (its take: `take_bytes`)."""
    from websockets.sync.client import connect

    t0 = time.perf_counter()
    response = httpx.post(
        server.base + "/v1/runs", json={"graph": graph, "target": "x"}, timeout=900
    )
    response.raise_for_status()
    run_id = response.json()["runId"]
    url = server.base.replace("http", "ws") + f"/v1/runs/{run_id}/events"
    with connect(url) as ws:
        while True:
            event = json.loads(ws.recv())
            if event["type"] in ("run_done", "error", "cancelled"):
                break
    if event["type"] != "run_done":
        raise RuntimeError(f"run {run_id} ended {event}")
    return (time.perf_counter() - t0) * 1000, str(run_id)


def take_bytes(server: ServerProcess, run_id: str) -> bytes:
    """The bytes of the one take of run `run_id`."""
    run = httpx.get(server.base + f"/v1/runs/{run_id}", timeout=60)
    run.raise_for_status()
    [take] = run.json()["takes"]
    body = httpx.get(server.base + str(take["uri"]), timeout=300)
    body.raise_for_status()
    return body.content
