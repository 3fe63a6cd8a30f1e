"""Server submit path without a model: time to ready, and submissions/s with p50/p99 latency.

Run by hand: `python bench/server_submit.py [--seconds 5] [--graph text|resize]`. It starts a real
`python -m inline_core.server` on loopback with a fresh data dir, checks that building the server
imports no torch, measures process start -> first /v1/health answer, then drives `POST /v1/runs`
from 1, 8 and 32 concurrent clients (httpx, asyncio). Every POST is durable before it answers.
Prints a table and writes bench/results/server_submit.json.

Targets (issue 2, on a 2-core machine): ready < 1.5 s without torch; >= 500 submissions/s at 32
clients with p99 < 50 ms. The load generator shares the machine's cores with the server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
from raw_http import RawHttpConnection

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "server_submit.json"

TORCH_FREE_CHECK = """
import sys, tempfile
from pathlib import Path
from inline_core.config import Config
from inline_core.server.app import create_app
d = Path(tempfile.mkdtemp())
create_app(Config(models_dir=d / "models", data_dir=d / "data", profile="cpu", dtype="float32"))
heavy = sorted(m for m in ("torch", "diffusers", "transformers") if m in sys.modules)
print(",".join(heavy))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_env(data: Path, port: int) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "INLINE_DATA_DIR": str(data / "data"),
            "INLINE_MODELS_DIR": str(data / "models"),
            "INLINE_PORT": str(port),
            "INLINE_PROFILE": "cpu",
            "INLINE_MAX_QUEUE": "1000000",  # measure the submit path, not the queue bound
            "PYTHONPATH": str(ROOT / "src"),
        }
    )
    return env


def start_server(
    data: Path, extra_env: Mapping[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], int, float]:
    """Start a server (with `extra_env` over its environment, e.g. INLINE_DATABASE_URL); return
    it, its port and seconds from spawn to the first health answer."""
    port = free_port()
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "inline_core.server"],
        env={**server_env(data, port), **(extra_env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    with httpx.Client() as client:
        while True:
            try:
                if client.get(f"http://127.0.0.1:{port}/v1/health", timeout=0.5).is_success:
                    return proc, port, time.perf_counter() - started
            except httpx.HTTPError:
                pass
            if proc.poll() is not None:
                raise SystemExit(f"server exited with {proc.returncode}")
            time.sleep(0.005)


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def graph_for(kind: str) -> tuple[dict[str, Any], str]:
    if kind == "text":
        nodes = [{"id": "t", "type": "input/text", "params": {"text": "a small prompt"}}]
        return {"schemaVersion": 1, "nodes": nodes}, "t"
    raise SystemExit(f"unknown graph {kind!r}")


class Tally:
    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.statuses: dict[int, int] = {}

    def add(self, status: int, seconds: float) -> None:
        self.latencies.append(seconds)
        self.statuses[status] = self.statuses.get(status, 0) + 1


async def httpx_user(url: str, body: bytes, deadline: float, tally: Tally | None) -> None:
    """One simulated user on its own httpx client (one keep-alive connection): a shared pool's
    bookkeeping is O(connections) per request in httpcore and would dominate the measurement."""
    headers = {"content-type": "application/json"}
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=1), timeout=30) as client:
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            response = await client.post(url, content=body, headers=headers)
            if tally is not None:
                tally.add(response.status_code, time.perf_counter() - t0)


async def raw_user(url: str, body: bytes, deadline: float, tally: Tally | None) -> None:
    """One simulated user speaking HTTP/1.1 keep-alive over a raw socket: about a tenth of
    httpx's CPU per request, so on a small machine the figures describe the server."""
    port = int(url.split(":")[2].split("/")[0])
    connection = await RawHttpConnection.open(port)
    request = RawHttpConnection.request_bytes("POST", "/v1/runs", body)
    try:
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            status, _ = await connection.send(request)
            if tally is not None:
                tally.add(status, time.perf_counter() - t0)
    finally:
        await connection.close()


async def drive(
    port: int, users: int, seconds: float, graph: dict[str, Any], target: str, client: str
) -> dict[str, Any]:
    body = json.dumps({"graph": graph, "target": target}).encode()
    url = f"http://127.0.0.1:{port}/v1/runs"
    user = raw_user if client == "raw" else httpx_user
    # Warm up connections and code paths, then measure.
    await asyncio.gather(*(user(url, body, time.perf_counter() + 0.5, None) for _ in range(users)))
    tally = Tally()
    began = time.perf_counter()
    await asyncio.gather(*(user(url, body, began + seconds, tally) for _ in range(users)))
    wall = time.perf_counter() - began
    accepted = tally.statuses.get(201, 0)
    ordered = sorted(tally.latencies)
    return {
        "client": client,
        "clients": users,
        "seconds": round(wall, 2),
        "requests": len(ordered),
        "accepted": accepted,
        "statuses": {str(k): v for k, v in sorted(tally.statuses.items())},
        "submissionsPerS": round(accepted / wall, 1),
        "p50Ms": round(statistics.median(ordered) * 1000, 2),
        "p99Ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 2),
    }


def fsync_baseline(seconds: float = 2.0) -> dict[str, float]:
    """What one durable write costs on this disk right now: the floor under every commit."""
    samples: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        fd = os.open(Path(tmp) / "probe", os.O_WRONLY | os.O_CREAT)
        try:
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                t0 = time.perf_counter()
                os.write(fd, b"x" * 4096)
                os.fsync(fd)
                samples.append(time.perf_counter() - t0)
        finally:
            os.close(fd)
    samples.sort()
    return {
        "samples": len(samples),
        "p50Ms": round(samples[len(samples) // 2] * 1000, 2),
        "p99Ms": round(samples[int(len(samples) * 0.99)] * 1000, 2),
        "maxMs": round(samples[-1] * 1000, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="Benchmark the server submit path.")
    parser.add_argument("--seconds", type=float, default=5.0, help="load duration per level")
    parser.add_argument("--graph", default="text", choices=["text"])
    parser.add_argument("--levels", default="1,8,32")
    parser.add_argument("--ready-trials", type=int, default=3)
    parser.add_argument(
        "--clients", default="raw,httpx", help="load generators to run: raw (light), httpx"
    )
    args = parser.parse_args()

    check = subprocess.run(
        [sys.executable, "-c", TORCH_FREE_CHECK],
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        capture_output=True,
        text=True,
        check=True,
    )
    heavy = [m for m in check.stdout.strip().split(",") if m]

    ready: list[float] = []
    for _ in range(args.ready_trials):
        with tempfile.TemporaryDirectory() as tmp:
            proc, _port, seconds = start_server(Path(tmp))
            stop_server(proc)
            ready.append(seconds)

    fsync = fsync_baseline()
    graph, target = graph_for(args.graph)
    rows: list[dict[str, Any]] = []
    for kind in args.clients.split(","):
        for level in (int(x) for x in args.levels.split(",")):
            # A fresh server and data dir per level, so each level's store figures are its own.
            with tempfile.TemporaryDirectory() as tmp:
                proc, port, _ = start_server(Path(tmp))
                try:
                    row = asyncio.run(drive(port, level, args.seconds, graph, target, kind))
                    health = httpx.get(f"http://127.0.0.1:{port}/v1/health").json()
                    row["store"] = health["store"]
                    # Runs still waiting when the load stopped: execution vs submission rate.
                    row["backlogAtEnd"] = health["runs"]
                    rows.append(row)
                finally:
                    stop_server(proc)

    print(f"heavy modules imported by building the server: {heavy or 'none'}")
    print(
        f"ready (spawn -> first /v1/health): min {min(ready):.3f} s, "
        f"median {statistics.median(ready):.3f} s over {len(ready)} starts"
    )
    print(
        f"disk (write 4 KB + fsync, same filesystem, before the load): p50 {fsync['p50Ms']} ms, "
        f"p99 {fsync['p99Ms']} ms, max {fsync['maxMs']} ms"
    )
    print(
        f"{'client':>6} {'users':>6} {'accepted':>9} {'subm/s':>9} {'p50 ms':>8} {'p99 ms':>8}"
        f" {'writes/commit':>13} {'commit ms':>9} {'slowest':>8} {'backlog':>8}  statuses"
    )
    for row in rows:
        store = row["store"]
        print(
            f"{row['client']:>6} {row['clients']:>6} {row['accepted']:>9} "
            f"{row['submissionsPerS']:>9} {row['p50Ms']:>8} {row['p99Ms']:>8} "
            f"{store['meanGroup']:>13} {store['meanCommitMs']:>9} {store['slowestCommitMs']:>8} "
            f"{row['backlogAtEnd']['queued']:>8}  {row['statuses']}"
        )
    result = {
        "bench": "server_submit",
        "graph": args.graph,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "load1mAtStart": os.getloadavg()[0],
        "heavyModulesImported": heavy,
        "fsyncBaseline": fsync,
        "readyS": {
            "min": round(min(ready), 3),
            "median": round(statistics.median(ready), 3),
            "all": [round(x, 3) for x in ready],
        },
        "levels": rows,
        "targets": {"readyS": 1.5, "submissionsPerSAt32": 500, "p99MsAt32": 50},
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
