"""Step-level batching across runs, on against off, through the real server and at the sampler.

    .venv/bin/python bench/batching.py [--cases tiny,mid] [--concurrency 1,2,4,8,16] [--rounds 2]
                                       [--paths server,sampler]

`server`: two servers in this process (uvicorn on loopback, the kit's random-weight Z-Image
models), one with the sampler's default limits for this device (batching on), one with
INLINE_MAX_BATCH=1 (off). N runs are posted at once (input/text -> alibaba/z-image-turbo, distinct
prompts and seeds), each timed from POST /v1/runs to the websocket's `run_done`, PNG take written.
`sampler`: the same renders as N threads calling `StepLoopSampler.run` on the loaded pipeline (no
HTTP, no take), which isolates what batching changes from the server's per-run costs.
On and off alternate per round, so drift in a shared machine hits both alike. Reported per N:
throughput (images/s = N / wall time of the round), p50 and p95 latency, and the on/off ratios
(throughput: above 1 is better; latency: below 1 is better). Prints a table, writes
bench/results/batching.json.

Cases: tiny (64 px, 8 steps) and mid (the ~110M-parameter transformer at 256 px, 4 steps: a forward
takes about half a second on this CPU, so fewer steps and N up to 8).
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import socket
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "batching.json"
PROMPTS = [
    "a lighthouse on a cliff at dusk",
    "a red fox in the snow",
    "a bowl of ramen, studio photo",
    "an old map of an imaginary island",
]
CASES: dict[str, dict[str, Any]] = {
    "tiny": {"kit": "tiny", "model": "zimage_tiny_diffusers", "size": 64, "steps": 8, "maxN": 16},
    "mid": {"kit": "mid", "model": "zimage_mid_diffusers", "size": 256, "steps": 4, "maxN": 8},
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def graph(case: dict[str, Any], seed: int) -> dict[str, Any]:
    return {
        "schemaVersion": 1,
        "nodes": [
            {"id": "p", "type": "input/text", "params": {"text": PROMPTS[seed % len(PROMPTS)]}},
            {
                "id": "z",
                "type": "alibaba/z-image-turbo",
                "params": {
                    "width": case["size"],
                    "height": case["size"],
                    "steps": case["steps"],
                    "guidance": 0.0,
                    "seed": seed,
                    "model": case["model"],
                },
                "inputs": {"prompt": {"from": "p", "output": "text"}},
            },
        ],
    }


@dataclass
class Server:
    name: str
    port: int
    server: Any
    thread: threading.Thread
    app: Any

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)

    def sampler_stats(self) -> dict[str, Any]:
        import httpx

        health = httpx.get(f"http://127.0.0.1:{self.port}/v1/health", timeout=30).json()
        return cast(dict[str, Any], health.get("sampler") or {})


def start_server(name: str, models: Path, max_batch: int | None, workers: int) -> Server:
    import httpx
    import uvicorn

    from inline_core.config import Config
    from inline_core.server.app import create_app

    port = free_port()
    config = Config(
        models_dir=models,
        data_dir=Path(tempfile.mkdtemp(prefix=f"batching-{name}-")),
        profile="cpu",
        port=port,
        max_batch=max_batch,
        run_workers=workers,  # every concurrent run must reach the sampler to be batched
    )
    app = create_app(config)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=5).is_success:
                break
        except httpx.TransportError:
            time.sleep(0.05)
    return Server(name, port, server, thread, app)


def render(port: int, case: dict[str, Any], seed: int) -> float:
    """One run through the server, POST to `run_done`, in milliseconds."""
    import httpx
    from websockets.sync.client import connect

    started = time.perf_counter()
    response = httpx.post(
        f"http://127.0.0.1:{port}/v1/runs",
        json={"graph": graph(case, seed), "target": "z"},
        timeout=600,
    )
    response.raise_for_status()
    run_id = response.json()["runId"]
    with connect(f"ws://127.0.0.1:{port}/v1/runs/{run_id}/events", open_timeout=60) as ws:
        while True:
            event = json.loads(ws.recv(timeout=600))
            if event["type"] in ("run_done", "error", "cancelled"):
                break
    if event["type"] != "run_done":
        raise RuntimeError(f"run {run_id} ended {event['type']}: {event}")
    return (time.perf_counter() - started) * 1000


Render = Callable[[dict[str, Any], int], float]


def server_render(server: Server) -> Render:
    return lambda case, seed: render(server.port, case, seed)


class SamplerSide:
    """Renders straight through a `StepLoopSampler` on pipelines loaded like the server does."""

    def __init__(self, models: Path, max_batch: int | None) -> None:
        from inline_core.config import Config
        from inline_core.device import policy_from_config
        from inline_core.models.catalog import Catalog
        from inline_core.models.zimage.runner import ZImageRunner
        from inline_core.sampling import StepLoopSampler

        self.sampler = StepLoopSampler(max_batch=max_batch)
        config = Config(models_dir=models, profile="cpu")
        self.runner = ZImageRunner(
            catalog=Catalog(models, ttl_s=0.0),
            config=config,
            sampler=self.sampler,
            policy=policy_from_config(config),
        )

    def render(self, case: dict[str, Any], seed: int) -> float:
        from inline_core.sampling import SampleJob

        sources = self.runner.resolver.resolve(case["model"]).require()
        pipeline = self.runner.engine().pipeline_for(sources)
        state = pipeline.request(
            prompt=PROMPTS[seed % len(PROMPTS)],
            width=case["size"],
            height=case["size"],
            steps=case["steps"],
            guidance=0.0,
            seed=seed,
        )
        started = time.perf_counter()
        self.sampler.run(SampleJob(pipeline, state))
        return (time.perf_counter() - started) * 1000


# Every render gets a seed of its own: the server caches node results by their inputs, and a
# repeated seed would be answered from that cache instead of rendered.
_seeds = itertools.count(1)


def round_of(render_one: Render, case: dict[str, Any], n: int) -> dict[str, Any]:
    """N renders started at once; their latencies and the round's wall time."""
    first_seed = next(_seeds)
    for _ in range(n - 1):
        next(_seeds)
    latencies: list[float] = [0.0] * n
    errors: list[BaseException] = []
    barrier = threading.Barrier(n)

    def one(i: int) -> None:
        barrier.wait()
        try:
            latencies[i] = render_one(case, first_seed + i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    if errors:
        raise errors[0]
    return {"wallS": wall, "latenciesMs": latencies}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    return statistics.quantiles(ordered, n=100, method="inclusive")[int(q) - 1]


def summarize(rounds: list[dict[str, Any]], n: int) -> dict[str, float]:
    latencies = [x for r in rounds for x in r["latenciesMs"]]
    throughput = statistics.median(n / r["wallS"] for r in rounds)
    return {
        "imagesPerS": round(throughput, 3),
        "p50Ms": round(percentile(latencies, 50), 1),
        "p95Ms": round(percentile(latencies, 95), 1),
    }


def compare(
    path: str, case: dict[str, Any], n: int, on: Render, off: Render, rounds: int
) -> dict[str, Any]:
    results: dict[str, list[dict[str, Any]]] = {"on": [], "off": []}
    for r in range(rounds):
        order = (("on", on), ("off", off)) if r % 2 == 0 else (("off", off), ("on", on))
        for name, render_one in order:
            results[name].append(round_of(render_one, case, n))
    s_on, s_off = summarize(results["on"], n), summarize(results["off"], n)
    row: dict[str, Any] = {
        "path": path,
        "case": case["kit"],
        "px": case["size"],
        "steps": case["steps"],
        "n": n,
        "on": s_on,
        "off": s_off,
        "throughputRatio": round(s_on["imagesPerS"] / s_off["imagesPerS"], 3),
        "p50Ratio": round(s_on["p50Ms"] / s_off["p50Ms"], 3),
        "p95Ratio": round(s_on["p95Ms"] / s_off["p95Ms"], 3),
    }
    print(
        f"{path:7} {case['kit']:4} {case['size']:4}px N={n:<3}"
        f" img/s on {s_on['imagesPerS']:7.3f} off {s_off['imagesPerS']:7.3f}"
        f" x{row['throughputRatio']:.2f} | p50 on {s_on['p50Ms']:8.1f} off"
        f" {s_off['p50Ms']:8.1f} x{row['p50Ratio']:.2f} | p95 on {s_on['p95Ms']:8.1f}"
        f" off {s_off['p95Ms']:8.1f} x{row['p95Ratio']:.2f}",
        flush=True,
    )
    return row


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", default="tiny,mid")
    parser.add_argument("--concurrency", default="1,2,4,8,16")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--paths", default="server,sampler")
    parser.add_argument("--models", type=Path, default=None, help="reuse a models folder")
    # One intra-op thread by default: on this shared 2-core machine a descheduled OpenMP worker
    # stalls every parallel region (measured: 8 tiny steps 1.5-5 s with 2 threads, 0.18 s with 1).
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(cast(int, args.threads))
    cases = [CASES[c] for c in cast(str, args.cases).split(",")]
    levels = [int(n) for n in cast(str, args.concurrency).split(",")]
    rounds = cast(int, args.rounds)
    paths = cast(str, args.paths).split(",")

    from inline_core.models.zimage.kit import build_kit
    from inline_core.sampling.limits import default_limits

    models = cast(Path | None, args.models) or Path(tempfile.mkdtemp(prefix="batching-")) / "m"
    for case in cases:
        if not (models / "diffusion_models" / case["model"]).exists():
            build_kit(models, case["kit"], layouts=("diffusers",))
    workers = max(levels)
    sides: dict[str, tuple[Render, Render]] = {}
    servers: list[Server] = []
    samplers: list[SamplerSide] = []
    if "server" in paths:
        servers = [
            start_server("on", models, None, workers),
            start_server("off", models, 1, workers),
        ]
        sides["server"] = (server_render(servers[0]), server_render(servers[1]))
    if "sampler" in paths:
        samplers = [SamplerSide(models, None), SamplerSide(models, 1)]
        sides["sampler"] = (samplers[0].render, samplers[1].render)
    rows: list[dict[str, Any]] = []
    stats: dict[str, Any] = {}
    try:
        for case in cases:
            for path, (on, off) in sides.items():
                on(case, next(_seeds))  # load the model, warm the kernels
                off(case, next(_seeds))
                for n in [n for n in levels if n <= case["maxN"]]:
                    rows.append(compare(path, case, n, on, off, rounds))
        for server in servers:
            stats[f"server-{server.name}"] = server.sampler_stats()
        for side, name in zip(samplers, ("on", "off"), strict=False):
            stats[f"sampler-{name}"] = side.sampler.stats()
    finally:
        for server in servers:
            server.stop()
        for side in samplers:
            side.sampler.close()
    limits = default_limits("cpu")
    out = {
        "meta": {
            "machine": platform.machine(),
            "processor": platform.processor(),
            "rounds": rounds,
            "limitsOn": {"maxBatch": limits.max_batch, "tokenBudget": limits.token_budget},
            "samplerStats": stats,
        },
        "rows": rows,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
