"""What step previews cost: tiny Z-Image renders with previews off, latent2rgb and taesd, side by
side in one run, at 1 and 8 concurrent renders.

    .venv/bin/python bench/previews.py [--rounds 12] [--steps 8] [--size 64] [--threads 1]

Each round submits `concurrency` renders at once to one `StepLoopSampler`, once per method, the
methods interleaved so drift hits them alike; a render with previews gets the server's path (a
channel on the one preview worker, the renderer at the default 512 px preview size, the kit's
tiny taef1 for taesd). Reported per method, as ratios to previews off in the same run:
- `wall`: the median round's wall time (what a user waits for, previews' thread included);
- `renderPerStep`: the preview worker's median time to render one preview over the median time
  of one forward (the sampler's counters): the budget is 3% for latent2rgb, 15% for taesd;
- `share`: all the rendering over all the forwards (the worker renders at most 10% of the time,
  so a costly method is coalesced into fewer previews);
- how many previews were rendered or dropped (stale: a newer one came first).
Writes bench/results/previews.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, cast

RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results" / "previews.json"
METHODS = ("off", "latent2rgb", "taesd")
CONCURRENCY = (1, 8)


class Timed:
    """The renderer, timing each call (on the preview worker's thread)."""

    def __init__(self, renderer: Any, method: str) -> None:
        self.renderer = renderer
        self.method = method
        self.lock = threading.Lock()
        self.ms: list[float] = []

    def __call__(self, latents: Any, latent_format: str) -> Any:
        t0 = time.perf_counter()
        image = self.renderer.render(self.method, latents, latent_format)
        with self.lock:
            self.ms.append((time.perf_counter() - t0) * 1000)
        return image


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--size", type=int, default=64)
    # One intra-op thread, as the other benches: on a shared 2-core machine a descheduled OpenMP
    # worker stalls every parallel region.
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(cast(int, args.threads))
    from batching_phases import load

    from inline_core.diffusion.preview.renderer import PreviewRenderer
    from inline_core.sampling import SampleJob, StepLoopSampler
    from inline_core.sampling.previews import PreviewWorker

    models = Path(tempfile.mkdtemp(prefix="previews-")) / "models"
    pipeline = load(models)
    renderer = PreviewRenderer(models / "vae_approx", 512)
    steps, size = cast(int, args.steps), cast(int, args.size)

    def one_round(concurrency: int, method: str, seed0: int) -> dict[str, Any]:
        sampler, worker = StepLoopSampler(), PreviewWorker()
        timed = Timed(renderer, method)
        jobs: list[SampleJob] = []
        for i in range(concurrency):
            state = pipeline.request(
                prompt="a lighthouse",
                width=size,
                height=size,
                steps=steps,
                guidance=0.0,
                seed=seed0 + i,
            )
            job = SampleJob(pipeline, state)
            if method != "off":
                job.preview = worker.channel(timed, lambda image, step, count: None)
            jobs.append(job)
        t0 = time.perf_counter()
        futures = [sampler.submit(job) for job in jobs]
        for future in futures:
            future.result()
        for job in jobs:
            if job.preview is not None:
                job.preview.flush(30.0)
        wall = (time.perf_counter() - t0) * 1000
        stats = sampler.stats()
        sampler.close()
        worker.close()
        return {
            "wallMs": wall,
            "forwardMs": stats["forwardSeconds"] * 1000,
            "stepMs": stats["forwardSeconds"] * 1000 / max(1, stats["forwards"]),
            "renderMs": timed.ms,
            "rendered": worker.counters.rendered,
            "dropped": worker.counters.dropped,
        }

    for method in METHODS:  # warm-up (loads the tiny decoder)
        one_round(1, method, 0)
    table: dict[str, dict[str, Any]] = {}
    for concurrency in CONCURRENCY:
        rounds: dict[str, list[dict[str, Any]]] = {m: [] for m in METHODS}
        for r in range(cast(int, args.rounds)):
            for method in METHODS:
                rounds[method].append(one_round(concurrency, method, 100 * r))
        base_wall = statistics.median(x["wallMs"] for x in rounds["off"])
        step_ms = statistics.median(x["stepMs"] for x in rounds["off"])
        for method in METHODS:
            runs = rounds[method]
            wall = statistics.median(x["wallMs"] for x in runs)
            render_ms = [ms for x in runs for ms in x["renderMs"]]
            render = statistics.median(render_ms) if render_ms else 0.0
            table[f"{concurrency}x{method}"] = {
                "concurrency": concurrency,
                "method": method,
                "wallMs": round(wall, 2),
                "wallRatio": round(wall / base_wall, 3),
                "stepMs": round(statistics.median(x["stepMs"] for x in runs), 3),
                "renderMs": round(render, 3),
                "renderPerStep": round(render / step_ms, 4),
                # All preview rendering over all forwards: what previews cost the run, amortised.
                "renderShare": round(sum(render_ms) / sum(x["forwardMs"] for x in runs), 4),
                "rendered": sum(x["rendered"] for x in runs),
                "dropped": sum(x["dropped"] for x in runs),
            }
    print(f"tiny Z-Image {size} px, {steps} steps, {args.rounds} rounds, {args.threads} thread(s)")
    print(
        f"{'renders':>7} {'method':>10} {'wall ms':>9} {'wall/off':>8} {'step ms':>8} "
        f"{'render ms':>9} {'render/step':>11} {'share':>6} {'rendered':>8} {'dropped':>7}"
    )
    for row in table.values():
        print(
            f"{row['concurrency']:>7} {row['method']:>10} {row['wallMs']:>9.1f} "
            f"{row['wallRatio']:>8.3f} {row['stepMs']:>8.2f} {row['renderMs']:>9.3f} "
            f"{row['renderPerStep']:>11.2%} {row['renderShare']:>6.1%} {row['rendered']:>8} "
            f"{row['dropped']:>7}"
        )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    body = {"steps": steps, "size": size, "rounds": args.rounds, "threads": args.threads}
    RESULTS.write_text(json.dumps({**body, "table": table}, indent=2) + "\n")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
