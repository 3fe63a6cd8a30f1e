"""Tiny LTX-2: step-level batching and the step cache, each against its baseline in one run.

Run by hand: `.venv/bin/python bench/ltx2_cache_batching.py [--requests 4] [--steps 24]
[--rounds 3]`.

The kit's random-weight LTX-2 folder (`inline-core kit --family ltx2`, written to a temporary
folder), 32x32 at 5 frames and 25 fps, guidance 3 (two rows a request), CPU float32, one process:
- batching: `--requests` renders of one shape submitted together to a step loop that batches
  them, against the same renders on a loop of one request a forward (`max_batch=1`);
- step cache: one render of `--steps` steps with DBCache (threshold 0.9: the kit's random
  weights move the front residual far more than a trained model's, warmup 4, at most 2 reuses
  in a row) against the same render uncached.
The sides alternate round by round, so both see the same machine load (the 1-minute load
average is recorded); medians are compared as ratios. Prints a table, writes
bench/results/ltx2_cache_batching.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "ltx2_cache_batching.json"
SHAPE: dict[str, Any] = {"width": 32, "height": 32, "frames": 5, "fps": 25, "format": "png"}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=4)
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    from inline_core.config import Config
    from inline_core.families.ltx2 import LTX2Family
    from inline_core.families.ltx2.kit import write_kit
    from inline_core.families.standalone import family_rig
    from inline_core.runtime.step_cache import StepCacheSettings
    from inline_core.sampling.job import SampleJob
    from inline_core.sampling.loop import StepLoopSampler

    cache = StepCacheSettings(threshold=0.9, warmup=4, front_blocks=1, max_consecutive=2)
    with tempfile.TemporaryDirectory() as tmp:
        models = write_kit(Path(tmp) / "models").root
        batched = StepLoopSampler(token_budget=1 << 20)
        alone = StepLoopSampler(max_batch=1)
        config = Config(models_dir=models, profile="cpu", dtype="float32")
        pipeline: Any = family_rig(LTX2Family, models, batched, config=config).pipeline()

        def state(seed: int, steps: int, cached: bool) -> Any:
            spec = {**SHAPE, "prompt": f"render {seed}", "seed": seed, "steps": steps}
            return pipeline.request(**spec, guidance=3.0, step_cache=cache if cached else None)

        def wave(sampler: StepLoopSampler, states: list[Any]) -> float:
            start = time.perf_counter()
            futures = [sampler.submit(SampleJob(pipeline, s)) for s in states]
            for future in futures:
                future.result(timeout=1800)
            return time.perf_counter() - start

        wave(batched, [state(0, 2, False)])  # loads the stack, warms the kernels
        times: dict[str, list[float]] = {"one a forward": [], "batched": [], "plain": []}
        times["cached"] = []
        reused: list[int] = []
        loads: list[float] = []
        for r in range(args.rounds):
            seeds = range(r * 100, r * 100 + args.requests)
            times["one a forward"].append(wave(alone, [state(s, 8, False) for s in seeds]))
            times["batched"].append(wave(batched, [state(s, 8, False) for s in seeds]))
            times["plain"].append(wave(alone, [state(r, args.steps, False)]))
            cached = state(r, args.steps, True)
            times["cached"].append(wave(alone, [cached]))
            reused.append(int(cached.cache.stats()["reusedSteps"]))
            loads.append(os.getloadavg()[0])
        batched.close()
        alone.close()

    medians = {side: statistics.median(values) for side, values in times.items()}
    result = {
        "requests": args.requests,
        "steps": args.steps,
        "rounds": args.rounds,
        "medianSeconds": medians,
        "batchingSpeedup": medians["one a forward"] / medians["batched"],
        "stepCacheSpeedup": medians["plain"] / medians["cached"],
        "reusedRowSteps": reused,
        "rowSteps": 2 * args.steps,
        "loadAverage1m": loads,
        "cpus": os.cpu_count(),
    }
    print(f"{'side':<16}{'median s':>10}")
    for side, value in medians.items():
        print(f"{side:<16}{value:>10.3f}")
    print(f"batching x{result['batchingSpeedup']:.2f} ({args.requests} requests, 8 steps)")
    print(
        f"step cache x{result['stepCacheSpeedup']:.2f} ({args.steps} steps; reused row-steps "
        f"{reused} of {2 * args.steps}); load {', '.join(f'{v:.1f}' for v in loads)}"
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
