"""Load bench: 200 clients submitting and watching Z-Image runs (the tiny kit model) for a minute.

Run by hand: `python bench/load_clients.py [--clients 200] [--seconds 60] [--renders 500]`.
It writes the tiny random-weight kit (`inline-core kit`) into a temp models folder, starts a real
`python -m inline_core.server` on loopback, renders once to load the model, then runs N asyncio
clients that each open a keep-alive connection (before the clock starts) and loop: POST /v1/runs
over it (timed: the submit latency; raw HTTP, see raw_http.py), open the run's websocket, read
until its terminal event. `--ramp S` spreads the clients' first submissions over S seconds (a load
tool's spawn rate); with 0 all N first submissions leave in the same instant. The load lasts
`--seconds`, and longer if needed until `--renders` runs have finished (so RSS after 500 renders
is measured), capped at `--max-seconds`.

Checked and reported:
- errors (any answer but 201 or 429, any socket that ends without a terminal event, any run that
  ends other than `done`) and lost runs (an accepted run the store does not hold as `done`);
- submit latency p50/p99 at N clients (the load generator shares the machine's cores);
- the server's RSS at start, after the first render (model resident), after 50 and 500 renders,
  and at the end, with its thread and file-descriptor counts (they must not grow with renders);
  RSS is also sampled once a second, and growth is reported both from the single readings at 50
  and 500 renders and from the medians of the ten samples that follow each mark;
- then a SIGTERM with runs in flight: how long the server takes to exit, that no process of its
  own is left, that nothing is left `running` in the store, and that every accepted run finishes
  after a restart.
Prints a table and writes bench/results/load.json. Loopback only; bounded in count and time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
from raw_http import RawHttpConnection, header
from websockets.asyncio.client import connect

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "load.json"
TERMINAL = ("run_done", "error", "cancelled")
FINISHED = ("done", "error", "cancelled")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def render_graph(prompt: str, size: int, steps: int) -> dict[str, Any]:
    return {
        "graph": {
            "schemaVersion": 1,
            "nodes": [
                {"id": "p", "type": "input/text", "params": {"text": prompt}},
                {
                    "id": "z",
                    "type": "alibaba/z-image-turbo",
                    "params": {"width": size, "height": size, "steps": steps, "seed": -1},
                    "inputs": {"prompt": {"from": "p", "output": "text"}},
                },
            ],
        },
        "target": "z",
    }


@dataclass
class Server:
    models: Path
    data: Path
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> float:
        """Start; return seconds until /v1/health answers."""
        self.port = free_port()
        env = dict(os.environ)
        env.update(
            {
                "INLINE_MODELS_DIR": str(self.models),
                "INLINE_DATA_DIR": str(self.data),
                "INLINE_PORT": str(self.port),
                "INLINE_HOST": "127.0.0.1",
                "INLINE_PROFILE": "cpu",
                "PYTHONPATH": str(ROOT / "src"),
            }
        )
        self.log_path = self.data.parent / f"server-{self.port}.log"
        with self.log_path.open("wb") as log:
            started = time.perf_counter()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "inline_core.server"], env=env, stdout=log, stderr=log
            )
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.log_path.read_text()[-2000:]}")
            try:
                if httpx.get(self.base + "/v1/health", timeout=1).is_success:
                    return time.perf_counter() - started
            except httpx.HTTPError:
                pass
            time.sleep(0.05)

    def rss_mb(self) -> float:
        assert self.proc is not None
        return psutil.Process(self.proc.pid).memory_info().rss / 2**20

    def resources(self) -> dict[str, float]:
        assert self.proc is not None
        process = psutil.Process(self.proc.pid)
        return {
            "rssMb": round(process.memory_info().rss / 2**20, 1),
            "threads": process.num_threads(),
            "fds": process.num_fds(),
        }

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list[float])
    rss_series: list[tuple[int, float]] = field(default_factory=list[tuple[int, float]])
    samples: list[tuple[float, int, int, float]] = field(
        default_factory=list[tuple[float, int, int, float]]
    )  # (seconds into the load, client, its nth submission, latency)
    accepted: list[str] = field(default_factory=list[str])
    done: int = 0
    busy: int = 0
    errors: list[str] = field(default_factory=list[str])
    marks: dict[str, dict[str, float]] = field(default_factory=dict[str, dict[str, float]])


async def watch(ws_url: str) -> dict[str, Any] | None:
    """The run's terminal event, or None if the socket ended without one."""
    async with connect(ws_url, max_size=2**22) as ws:
        async for raw in ws:
            event = json.loads(raw)
            if event["type"] in TERMINAL:
                return event
    return None


async def client(
    index: int,
    server: Server,
    args: argparse.Namespace,
    tally: Tally,
    stop: asyncio.Event,
    connected: asyncio.Semaphore,
    go: asyncio.Event,
) -> None:
    ws_base = f"ws://127.0.0.1:{server.port}"
    # A user's app holds its connection open before it submits; TCP setup is not submit time.
    # POSTs go over a raw keep-alive socket: httpx's own CPU per request, on cores shared with
    # the server, would be most of what a burst of 200 first submissions measures.
    try:
        http = await RawHttpConnection.open(server.port)
        await http.get("/v1/health")
    except (OSError, asyncio.IncompleteReadError) as exc:
        tally.errors.append(f"connect: {type(exc).__name__}: {exc}")
        connected.release()
        return
    try:
        connected.release()
        await go.wait()
        # Users arrive over `--ramp` seconds (as a load tool's spawn rate), not all in one instant.
        await asyncio.sleep(index * args.ramp / args.clients)
        n = 0
        while not stop.is_set():
            n += 1
            body = render_graph(f"client {index} render {n}", args.size, args.steps)
            t0 = time.perf_counter()
            try:
                status, head, answer = await http.post_json("/v1/runs", body)
            except (OSError, asyncio.IncompleteReadError) as exc:
                tally.errors.append(f"POST: {type(exc).__name__}: {exc}")
                return
            tally.latencies.append(time.perf_counter() - t0)
            tally.samples.append((t0, index, n, time.perf_counter() - t0))
            if status == 429:
                tally.busy += 1
                await asyncio.sleep(float(header(head, b"retry-after") or "1"))
                continue
            if status != 201:
                tally.errors.append(f"POST {status}: {str(answer)[:200]}")
                continue
            run_id = answer["runId"]
            tally.accepted.append(run_id)
            try:
                event = await watch(f"{ws_base}/v1/runs/{run_id}/events")
            except Exception as exc:  # a socket error is an error of the run under load
                tally.errors.append(f"websocket {run_id}: {type(exc).__name__}: {exc}")
                continue
            if event is None or event["type"] != "run_done":
                tally.errors.append(f"run {run_id} ended with {event}")
                continue
            tally.done += 1
    finally:
        await http.close()


async def monitor(
    server: Server, tally: Tally, args: argparse.Namespace, stop: asyncio.Event, started: float
) -> None:
    """Record the server's resources at 50 and 500 renders; stop the load when it is time."""
    next_sample = 0.0
    while not stop.is_set():
        if time.perf_counter() >= next_sample:  # (renders, RSS) once a second: the trend
            tally.rss_series.append((tally.done, round(server.rss_mb(), 1)))
            next_sample = time.perf_counter() + 1.0
        for mark in (50, args.renders):
            if tally.done >= mark and f"after{mark}" not in tally.marks:
                tally.marks[f"after{mark}"] = {**server.resources(), "renders": tally.done}
        elapsed = time.perf_counter() - started
        enough = tally.done >= args.renders and elapsed >= args.seconds
        if enough or elapsed >= args.max_seconds:
            stop.set()
        await asyncio.sleep(0.1)


async def load(server: Server, args: argparse.Namespace, tally: Tally) -> float:
    stop = asyncio.Event()
    connected, go = asyncio.Semaphore(0), asyncio.Event()
    tasks = [
        asyncio.create_task(client(i, server, args, tally, stop, connected, go))
        for i in range(args.clients)
    ]
    for _ in tasks:
        await connected.acquire()
    started = time.perf_counter()
    go.set()
    watcher = asyncio.create_task(monitor(server, tally, args, stop, started))
    await asyncio.gather(*tasks)  # each client finishes the render it is watching
    await watcher
    return time.perf_counter() - started


def store_runs(data: Path) -> dict[str, str]:
    with closing(sqlite3.connect(data / "runs.db", timeout=30)) as db:
        return dict(db.execute("SELECT id, status FROM runs").fetchall())


def ours(data: Path) -> list[int]:
    pids: list[int] = []
    for process in psutil.process_iter():
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                continue
            if process.environ().get("INLINE_DATA_DIR") == str(data):
                pids.append(process.pid)
        except (psutil.Error, OSError):
            continue
    return pids


def sigterm_under_load(server: Server, args: argparse.Namespace) -> dict[str, Any]:
    """Submit a burst, SIGTERM while it runs, check the exit, restart, check they all finish."""
    with httpx.Client(base_url=server.base, timeout=60) as http:
        burst = [
            http.post("/v1/runs", json=render_graph(f"burst {i}", args.size, args.steps))
            for i in range(args.burst)
        ]
        ids = [r.json()["runId"] for r in burst if r.status_code == 201]
        while http.get("/v1/health").json()["runs"]["running"] == 0:
            time.sleep(0.01)
    assert server.proc is not None
    t0 = time.perf_counter()
    server.proc.send_signal(signal.SIGTERM)
    server.proc.wait(60)
    exit_s = time.perf_counter() - t0
    exit_status = server.proc.returncode
    left = ours(server.data)
    stored = store_runs(server.data)
    stuck_running = sum(1 for s in stored.values() if s == "running")
    requeued = sum(1 for i in ids if stored.get(i) == "queued")
    restart_s = server.start()
    t1 = time.perf_counter()
    with httpx.Client(base_url=server.base, timeout=60) as http:
        while True:
            states = [http.get(f"/v1/runs/{i}").json()["status"] for i in ids]
            if all(s in FINISHED for s in states):
                break
            time.sleep(0.1)
    return {
        "burst": len(ids),
        "exitS": round(exit_s, 2),
        "exitStatus": exit_status,
        "processesLeft": len(left),
        "runningInStoreAfterExit": stuck_running,
        "queuedForNextStart": requeued,
        "restartS": round(restart_s, 2),
        "resumedAndFinishedS": round(time.perf_counter() - t1, 2),
        "statusesAfterRestart": {s: states.count(s) for s in set(states)},
    }


def slope(series: list[tuple[int, float]]) -> float | None:
    """Least-squares RSS growth per 100 renders over the part of the load after 50 renders."""
    points = [(r, m) for r, m in series if r >= 50]
    if len(points) < 3:
        return None
    mean_r = statistics.fmean(r for r, _ in points)
    mean_m = statistics.fmean(m for _, m in points)
    spread = sum((r - mean_r) ** 2 for r, _ in points)
    if spread == 0:
        return None
    covariance = sum((r - mean_r) * (m - mean_m) for r, m in points)
    return round(covariance / spread * 100, 2)


def window_median(series: list[tuple[int, float]], mark: int, samples: int = 10) -> float | None:
    """Median RSS over the first `samples` once-a-second samples taken at or after `mark` renders.

    One sample is the resident heap plus whatever the renders in flight hold at that instant
    (measured: +-25 MB under this load), so a mark's single reading says more about the moment
    than about growth; the median over the following seconds compares like with like.
    """
    window = [m for r, m in series if r >= mark][:samples]
    return round(statistics.median(window), 1) if window else None


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description="200 clients watching tiny Z-Image renders")
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--renders", type=int, default=500)
    parser.add_argument("--max-seconds", type=float, default=240.0)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--burst", type=int, default=40, help="runs in flight at the SIGTERM")
    parser.add_argument(
        "--ramp", type=float, default=0.0, help="seconds over which the clients start submitting"
    )
    args = parser.parse_args()
    load_before = os.getloadavg()

    with tempfile.TemporaryDirectory(prefix="inline-load-") as tmp:
        models = Path(tmp) / "models"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "inline_core.families.zimage.kit",
                "--out",
                str(models),
                "--layout",
                "comfy",
            ],
            check=True,
            capture_output=True,
            env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        )
        server = Server(models=models, data=Path(tmp) / "data")
        try:
            ready_s = server.start()
            tally = Tally()
            tally.marks["start"] = server.resources()
            warm = httpx.post(
                server.base + "/v1/runs", json=render_graph("warm", args.size, args.steps)
            )
            warm_id = warm.json()["runId"]
            while httpx.get(f"{server.base}/v1/runs/{warm_id}").json()["status"] not in FINISHED:
                time.sleep(0.05)
            tally.marks["afterFirstRender"] = server.resources()
            seconds = asyncio.run(load(server, args, tally))
            time.sleep(2.0)  # let the last runs end; the server trims once its queue empties
            tally.marks["idleAtEnd"] = {**server.resources(), "renders": tally.done}
            health = httpx.get(server.base + "/v1/health").json()
            stored = store_runs(server.data)
            lost = [i for i in tally.accepted if stored.get(i) != "done"]
            extra = set(stored) - set(tally.accepted) - {warm_id}
            shutdown = sigterm_under_load(server, args)
        finally:
            server.stop()

    steady = [lat for _t, _c, n, lat in tally.samples if n > 1]
    first = [lat for _t, _c, n, lat in tally.samples if n == 1]
    after50 = tally.marks.get("after50", {}).get("rssMb", 0.0)
    after_n = tally.marks.get(f"after{args.renders}", {}).get("rssMb", 0.0)
    growth = (after_n - after50) / after50 * 100 if after50 and after_n else None
    median50 = window_median(tally.rss_series, 50)
    median_n = window_median(tally.rss_series, args.renders)
    median_growth = (
        (median_n - median50) / median50 * 100 if median50 and median_n is not None else None
    )
    summary: dict[str, Any] = {
        "clients": args.clients,
        "rampS": args.ramp,
        "seconds": round(seconds, 1),
        "render": f"{args.size}x{args.size}, {args.steps} steps, tiny Z-Image kit (CPU)",
        "readyS": round(ready_s, 2),
        "submitted": len(tally.latencies),
        "accepted": len(tally.accepted),
        "renders": tally.done,
        "rendersPerS": round(tally.done / seconds, 2),
        "busy429": tally.busy,
        "errors": len(tally.errors),
        "errorSamples": tally.errors[:5],
        "lostRuns": len(lost),
        "unexpectedRuns": len(extra),
        "submitP50Ms": round(percentile(tally.latencies, 0.50) * 1000, 1),
        "submitP99Ms": round(percentile(tally.latencies, 0.99) * 1000, 1),
        # Every client's first POST leaves in the same instant (a thundering herd at start);
        # after that, clients submit as their renders finish.
        "steadySubmitP99Ms": round(percentile(steady, 0.99) * 1000, 1),
        "steadySubmitMaxMs": round(max(steady, default=0.0) * 1000, 1),
        "firstSubmitP50Ms": round(percentile(first, 0.50) * 1000, 1),
        "firstSubmitMaxMs": round(max(first, default=0.0) * 1000, 1),
        "submitMeanMs": round(statistics.fmean(tally.latencies) * 1000, 1)
        if tally.latencies
        else None,
        "resources": tally.marks,
        "rssGrowthPct50To500": round(growth, 2) if growth is not None else None,
        "rssMedianMbAfter50": median50,
        f"rssMedianMbAfter{args.renders}": median_n,
        "rssMedianGrowthPct": round(median_growth, 2) if median_growth is not None else None,
        "rssSeries": {
            "renders": [r for r, _ in tally.rss_series],
            "rssMb": [m for _, m in tally.rss_series],
        },
        "rssSlopeMbPer100Renders": slope(tally.rss_series),
        "sampler": health.get("sampler"),
        "store": health.get("store"),
        "sigterm": shutdown,
        "loadAverageBefore": [round(x, 2) for x in load_before],
        "loadAverageAfter": [round(x, 2) for x in os.getloadavg()],
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus",
    }
    print(
        f"{'clients':>8} {'seconds':>8} {'renders':>8} {'r/s':>6} {'errors':>6} {'lost':>5} "
        f"{'p50 ms':>7} {'p99 ms':>7} {'steady p99':>10}"
    )
    print(
        f"{args.clients:>8} {seconds:>8.1f} {tally.done:>8} {summary['rendersPerS']:>6} "
        f"{len(tally.errors):>6} {len(lost):>5} {summary['submitP50Ms']:>7} "
        f"{summary['submitP99Ms']:>7} {summary['steadySubmitP99Ms']:>10}"
    )
    print(f"{'mark':>18} {'renders':>8} {'RSS MB':>8} {'threads':>8} {'fds':>5}")
    for mark, values in tally.marks.items():
        print(
            f"{mark:>18} {values.get('renders', 0):>8.0f} {values['rssMb']:>8.1f} "
            f"{values['threads']:>8.0f} {values['fds']:>5.0f}"
        )
    print(
        f"RSS median over the 10 s after 50 renders {median50} MB, after {args.renders} "
        f"{median_n} MB: {summary['rssMedianGrowthPct']}% (point readings: "
        f"{summary['rssGrowthPct50To500']}%)"
    )
    print(json.dumps(summary, indent=2))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(summary, indent=2) + "\n")
    return 0 if not tally.errors and not lost else 1


if __name__ == "__main__":
    raise SystemExit(main())
