"""Step-level batching across runs, on against off, through the real server and at the sampler.

    .venv/bin/python bench/batching.py [--cases tiny,mid,mix] [--concurrency 1,2,4,8,16]
                                       [--rounds 2] [--min-images 16] [--paths server,sampler]

`server`: two servers in this process (uvicorn on loopback, the kit's random-weight Z-Image
models), one with the sampler's default limits for this device (batching on), one with
INLINE_MAX_BATCH=1 (off). N runs are posted at once (input/text -> alibaba/z-image-turbo, distinct
prompts and seeds), each timed from POST /v1/runs to the websocket's `run_done`, PNG take written.
`sampler`: the same renders as N threads calling `StepLoopSampler.run` on the loaded pipeline (no
HTTP, no take), which isolates what batching changes from the server's per-run costs.
`--off decodes` (sampler path): "off" batches forwards too and only decodes one job at a time, to
see what batched VAE decodes add on their own.
A round is enough waves of N concurrent renders to make at least `--min-images` images per
setting (a lone render, N=1, is otherwise one short sample per round and too noisy to compare);
on and off take turns wave by wave, the first turn alternating per round, so drift on a shared
machine hits both alike (measured: per-round turns gave 0.69-1.14x at N=1 where the code path is
the same; per-render turns gave equal means). Reported per N:
throughput (images/s = N / the median wall time of a wave of N, over every round), p50 and p95
latency, and the on/off ratios (throughput: above 1 is better; latency: below 1 is better). Prints a
table, writes bench/results/batching.json.

Cases: tiny (64 px, 8 steps), mid (the ~110M-parameter transformer at 256 px, 4 steps: a forward
takes about half a second on this CPU, so fewer steps and N up to 8) and mix (the tiny model, each
run a different size and step count: 64 px/8, 128/4, 80/6, 96/3 in turn).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
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
    "tiny": {"kit": "tiny", "model": "zimage_tiny_diffusers", "shapes": [(64, 8)], "maxN": 16},
    "mid": {"kit": "mid", "model": "zimage_mid_diffusers", "shapes": [(256, 4)], "maxN": 8},
    "mix": {
        "kit": "tiny",
        "model": "zimage_tiny_diffusers",
        "shapes": [(64, 8), (128, 4), (80, 6), (96, 3)],
        "maxN": 16,
    },
}


def shape_of(case: dict[str, Any], index: int) -> tuple[int, int]:
    """(side in px, steps) of a round's render `index`: mixed cases take their shapes in turn."""
    shapes = cast(list[tuple[int, int]], case["shapes"])
    return shapes[index % len(shapes)]


def one_shape(case: dict[str, Any], index: int) -> dict[str, Any]:
    """The case narrowed to render `index`'s shape: on and off render the same sequence."""
    return {**case, "shapes": [shape_of(case, index)]}


def case_label(case: dict[str, Any]) -> str:
    shapes = cast(list[tuple[int, int]], case["shapes"])
    if len(shapes) == 1:
        return f"{case['name']:4} {shapes[0][0]:4}px"
    return f"{case['name']:4} mixed "


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def graph(case: dict[str, Any], seed: int) -> dict[str, Any]:
    """A prompt into the case's node (`node`, Z-Image's by default, with its `params` on top)."""
    size, steps = shape_of(case, 0)
    params = {"width": size, "height": size, "steps": steps, "guidance": 0.0, "seed": seed}
    return {
        "schemaVersion": 1,
        "nodes": [
            {"id": "p", "type": "input/text", "params": {"text": PROMPTS[seed % len(PROMPTS)]}},
            {
                "id": "z",
                "type": case.get("node", "alibaba/z-image-turbo"),
                "params": {**params, "model": case["model"], **case.get("params", {})},
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
        dtype="float32",
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

    def __init__(
        self, models: Path, max_batch: int | None, decode_pixel_budget: int | None = None
    ) -> None:
        from inline_core.families.standalone import family_rig
        from inline_core.families.zimage import ZImageFamily
        from inline_core.sampling import StepLoopSampler

        self.sampler = StepLoopSampler(max_batch=max_batch, decode_pixel_budget=decode_pixel_budget)
        self.runner = family_rig(ZImageFamily, models, self.sampler)

    def render(self, case: dict[str, Any], seed: int) -> float:
        from inline_core.sampling import SampleJob

        pipeline = self.runner.pipeline(case["model"])
        size, steps = shape_of(case, 0)
        state = pipeline.request(
            prompt=PROMPTS[seed % len(PROMPTS)],
            width=size,
            height=size,
            steps=steps,
            guidance=0.0,
            seed=seed,
        )
        started = time.perf_counter()
        self.sampler.run(SampleJob(pipeline, state))
        return (time.perf_counter() - started) * 1000


# Every render gets a seed of its own: the server caches node results by their inputs, and a
# repeated seed would be answered from that cache instead of rendered.
_seeds = itertools.count(1)


def timed_threads(work: Callable[[int], None], n: int) -> float:
    """Run `work(0..n-1)` on n threads at once; seconds from the first start to the last end."""
    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - started


def wave(
    render_one: Render, case: dict[str, Any], n: int, first_shape: int
) -> tuple[float, list[float]]:
    """N renders started at once: the wave's wall time and their latencies."""
    first_seed = next(_seeds)
    for _ in range(n - 1):
        next(_seeds)
    latencies: list[float] = [0.0] * n
    errors: list[BaseException] = []
    barrier = threading.Barrier(n)

    def one(i: int) -> None:
        barrier.wait()
        try:
            latencies[i] = render_one(one_shape(case, first_shape + i), first_seed + i)
        except BaseException as exc:
            errors.append(exc)

    wall = timed_threads(one, n)
    if errors:
        raise errors[0]
    return wall, latencies


def round_of(
    sides: dict[str, Render], case: dict[str, Any], n: int, waves: int, first: int
) -> dict[str, dict[str, Any]]:
    """`waves` waves of N concurrent renders per setting, the settings taking turns wave by wave
    (so drift on a shared machine hits both alike); per setting its wall time and latencies."""
    names = list(sides)
    out: dict[str, dict[str, Any]] = {name: {"waveWallsS": [], "latenciesMs": []} for name in names}
    for w in range(waves):
        turn = names[(first + w) % 2 :] + names[: (first + w) % 2]
        for name in turn:
            wall, latencies = wave(sides[name], case, n, w * n)
            out[name]["waveWallsS"].append(wall)
            out[name]["latenciesMs"] += latencies
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    return statistics.quantiles(ordered, n=100, method="inclusive")[int(q) - 1]


def summarize(rounds: list[dict[str, Any]], n: int) -> dict[str, float]:
    latencies = [x for r in rounds for x in r["latenciesMs"]]
    # N over the median wave: a wave stalled by another process on the shared machine moves a
    # mean (measured: 0.90x at N=1 with equal p50s) but not the median.
    throughput = n / statistics.median(w for r in rounds for w in r["waveWallsS"])
    return {
        "imagesPerS": round(throughput, 3),
        "p50Ms": round(percentile(latencies, 50), 1),
        "p95Ms": round(percentile(latencies, 95), 1),
    }


def compare(
    path: str, case: dict[str, Any], n: int, on: Render, off: Render, rounds: int, min_images: int
) -> dict[str, Any]:
    waves = max(1, -(-min_images // n))
    results: dict[str, list[dict[str, Any]]] = {"on": [], "off": []}
    for r in range(rounds):
        for name, result in round_of({"on": on, "off": off}, case, n, waves, r % 2).items():
            results[name].append(result)
    s_on, s_off = summarize(results["on"], n), summarize(results["off"], n)
    row: dict[str, Any] = {
        "path": path,
        "case": case["name"],
        "shapes": [{"px": px, "steps": steps} for px, steps in case["shapes"]],
        "n": n,
        "imagesPerRound": waves * n,
        "on": s_on,
        "off": s_off,
        "throughputRatio": round(s_on["imagesPerS"] / s_off["imagesPerS"], 3),
        "p50Ratio": round(s_on["p50Ms"] / s_off["p50Ms"], 3),
        "p95Ratio": round(s_on["p95Ms"] / s_off["p95Ms"], 3),
    }
    print(
        f"{path:7} {case_label(case)} N={n:<3}"
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
    parser.add_argument("--min-images", type=int, default=16, help="per round and setting")
    parser.add_argument("--paths", default="server,sampler")
    parser.add_argument("--models", type=Path, default=None, help="reuse a models folder")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the JSON goes")
    parser.add_argument(
        "--off",
        choices=("batching", "decodes"),
        default="batching",
        help="what 'off' turns off: all batching (INLINE_MAX_BATCH=1), or only batched decodes "
        "(the forwards still batched; sampler path only)",
    )
    # One intra-op thread by default: on this shared 2-core machine a descheduled OpenMP worker
    # stalls every parallel region (measured: 8 tiny steps 1.5-5 s with 2 threads, 0.18 s with 1).
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(cast(int, args.threads))
    cases: list[dict[str, Any]] = [
        {"name": c, **CASES[c]} for c in cast(str, args.cases).split(",")
    ]
    min_images = cast(int, args.min_images)
    levels = [int(n) for n in cast(str, args.concurrency).split(",")]
    rounds = cast(int, args.rounds)
    paths = cast(str, args.paths).split(",")

    from inline_core.families.zimage.kit import build_kit
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
    if cast(str, args.off) == "decodes":
        paths = [p for p in paths if p == "sampler"]
        if not paths:
            parser.error("--off decodes compares at the sampler only (add --paths sampler)")
    if "sampler" in paths:
        off_side = (
            SamplerSide(models, None, decode_pixel_budget=0)
            if args.off == "decodes"
            else SamplerSide(models, 1)
        )
        samplers = [SamplerSide(models, None), off_side]
        sides["sampler"] = (samplers[0].render, samplers[1].render)
    rows: list[dict[str, Any]] = []
    stats: dict[str, Any] = {}
    try:
        for case in cases:
            for path, (on, off) in sides.items():
                for index in range(len(case["shapes"])):  # load the model, warm the kernels
                    on(one_shape(case, index), next(_seeds))
                    off(one_shape(case, index), next(_seeds))
                for n in [n for n in levels if n <= case["maxN"]]:
                    rows.append(compare(path, case, n, on, off, rounds, min_images))
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
            "off": args.off,
            "machine": platform.machine(),
            "processor": platform.processor(),
            "rounds": rounds,
            "minImagesPerRound": min_images,
            "loadAverage": os.getloadavg(),
            "limitsOn": {
                "maxBatch": limits.max_batch,
                "tokenBudget": limits.token_budget,
                "decodePixelBudget": limits.decode_pixel_budget,
            },
            "samplerStats": stats,
        },
        "rows": rows,
    }
    target = cast(Path, args.out)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
