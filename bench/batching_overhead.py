"""What the step loop adds to a lone render: the sampler against driving the pipeline by hand.

    .venv/bin/python bench/batching_overhead.py [--renders 30]

A tiny Z-Image render (64 px, 8 steps) run (a) by calling the four step-protocol methods directly
on this thread, (b) through `StepLoopSampler` with batching off and (c) with batching on (default
limits), interleaved, best and median of `--renders` each. The sampler's cost is two thread
hand-offs per render and a little bookkeeping per step; a lone render must not be slower with
batching on. Writes bench/results/batching_overhead.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results" / "batching_overhead.json"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--renders", type=int, default=30)
    # One intra-op thread by default: on this shared 2-core machine a descheduled OpenMP worker
    # stalls every parallel region (measured: 8 tiny steps 1.5-5 s with 2 threads, 0.18 s with 1).
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(cast(int, args.threads))
    renders = cast(int, args.renders)

    from batching_phases import load

    from inline_core.sampling import SampleJob, StepLoopSampler

    pipeline = load(Path(tempfile.mkdtemp(prefix="overhead-")) / "models")
    off, on = StepLoopSampler(max_batch=1), StepLoopSampler()

    def request(seed: int) -> Any:
        return pipeline.request(
            prompt="a lighthouse", width=64, height=64, steps=8, guidance=0.0, seed=seed
        )

    def direct(seed: int) -> None:
        state = pipeline.prepare_encode(request(seed))
        while not state.done:
            (pred,) = pipeline.denoise_step([state])
            pipeline.step_scheduler(state, pred)
        pipeline.post_decode(state)

    ways: dict[str, Callable[[int], object]] = {
        "direct": direct,
        "samplerOff": lambda seed: off.run(SampleJob(pipeline, request(seed))),
        "samplerOn": lambda seed: on.run(SampleJob(pipeline, request(seed))),
    }
    times: dict[str, list[float]] = {name: [] for name in ways}
    for way in ways.values():  # warm-up
        way(0)
    for i in range(renders):
        for name, way in ways.items():
            t0 = time.perf_counter()
            way(i)
            times[name].append((time.perf_counter() - t0) * 1000)
    off.close()
    on.close()
    summary = {
        name: {"bestMs": round(min(t), 2), "medianMs": round(statistics.median(t), 2)}
        for name, t in times.items()
    }
    base = summary["direct"]
    for name, s in summary.items():
        print(
            f"{name:11} best {s['bestMs']:8.2f} ms ({s['bestMs'] / base['bestMs']:.3f}x)"
            f"  median {s['medianMs']:8.2f} ms ({s['medianMs'] / base['medianMs']:.3f}x)"
        )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"renders": renders, "summary": summary}, indent=2) + "\n")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
