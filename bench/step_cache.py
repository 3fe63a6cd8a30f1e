"""Step caching (DBCache, per request) at the sampler: what it skips, what it saves, and whether
it keeps working under batching.

    .venv/bin/python bench/step_cache.py [--rounds 3] [--steps 28] [--threshold 0.35]
                                         [--lone-size 256] [--batch-size 128] [--concurrent 8]

On the kit's mid-size random-weight Z-Image (dim 768, 10 main blocks, ~110M; written to a
temporary folder), through the real `StepLoopSampler` and the resident pipeline, side by side in
one run, settings alternating per round so drift on a shared machine hits each alike:

1. A lone render at `--steps` steps, caching off against on: wall time, the sampler's forward
   time, and the blocks the cache skipped (of steps x main blocks).
2. `--concurrent` renders at once, all cached, batching on (this server) against batching off
   (one request per forward: what a per-transformer cache such as cache-dit's forces, and what
   vLLM-Omni and SGLang do by turning caching off or refusing it under step batching); and
   batching on with caching off, for scale.

The random weights move the front residual far more from step to step than a trained model's
(relative L1 0.74-1.08 at 128 px over 28 steps, measured here; cache-dit's default threshold
0.08 reuses nothing), so the threshold is the bench's own (0.9: the cap on consecutive reuses
then does much of the deciding), stated in the output with the warmup (8 steps), the front
blocks (cache-dit's F8B0 would leave 2 of 10 blocks here, so F4B0) and the cap. What it
measures is what skipping costs and saves, not the quality of a trained model's cached render.

Prints a table, writes bench/results/step_cache.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lora import alternate  # one way to alternate settings per round for every bench

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "step_cache.json"
MODEL = "zimage_mid_diffusers"


class Rig:
    def __init__(self, models: Path) -> None:
        from inline_core.config import Config
        from inline_core.families.standalone import family_rig
        from inline_core.families.zimage import ZImageFamily
        from inline_core.sampling.loop import StepLoopSampler

        self.batched = StepLoopSampler()
        self.alone = StepLoopSampler(max_batch=1)
        config = Config(models_dir=models, profile="cpu", dtype="float32")
        self.rig = family_rig(ZImageFamily, models, self.batched, config=config)
        self.pipeline: Any = self.rig.pipeline(MODEL)
        self.blocks = len(self.pipeline.denoiser.transformer.layers)

    def state(self, seed: int, size: int, steps: int, cache: Any) -> Any:
        return self.pipeline.request(
            prompt=f"a render {seed}",
            width=size,
            height=size,
            steps=steps,
            guidance=0.0,
            seed=seed,
            step_cache=cache,
        )

    def wave(self, sampler: Any, states: list[Any]) -> float:
        from inline_core.sampling.job import SampleJob

        start = time.perf_counter()
        futures = [sampler.submit(SampleJob(self.pipeline, s)) for s in states]
        for f in futures:
            f.result(timeout=1800)
        return time.perf_counter() - start

    def close(self) -> None:
        self.batched.close()
        self.alone.close()


def skipped(states: list[Any]) -> dict[str, int]:
    totals = {"computedSteps": 0, "reusedSteps": 0, "skippedBlocks": 0}
    for s in states:
        for key, value in s.cache.stats().items():
            totals[key] += value
    return totals


def lone(rig: Rig, rounds: int, steps: int, size: int, cache: Any) -> dict[str, Any]:
    last: dict[str, Any] = {}
    forward: dict[str, list[float]] = {"off": [], "on": []}

    def run(name: str, settings: Any) -> Callable[[], float]:
        def once() -> float:
            state = rig.state(1, size, steps, settings)
            before = rig.batched.stats()["forwardSeconds"]
            seconds = rig.wave(rig.batched, [state])
            forward[name].append(rig.batched.stats()["forwardSeconds"] - before)
            last[name] = state
            return seconds

        return once

    rig.wave(rig.batched, [rig.state(1, size, 2, None)])  # warm
    times = alternate({"off": run("off", None), "on": run("on", cache)}, rounds)
    wall = {name: statistics.median(t) for name, t in times.items()}
    fwd = {name: statistics.median(t) for name, t in forward.items()}
    stats = skipped([last["on"]])
    return {
        "wallSeconds": wall,
        "forwardSeconds": fwd,
        "samples": times,
        "stats": stats,
        "blocks": steps * rig.blocks,
        "wallOffOverOn": wall["off"] / wall["on"],
        "forwardOffOverOn": fwd["off"] / fwd["on"],
    }


def concurrent(
    rig: Rig, rounds: int, steps: int, size: int, count: int, cache: Any
) -> dict[str, Any]:
    last: dict[str, list[Any]] = {}

    def run(name: str, sampler: Any, settings: Any) -> Callable[[], float]:
        def once() -> float:
            states = [rig.state(i, size, steps, settings) for i in range(count)]
            last[name] = states
            return rig.wave(sampler, states)

        return once

    rig.wave(rig.batched, [rig.state(i, size, 2, cache) for i in range(count)])  # warm
    before = rig.batched.stats()
    times = alternate(
        {
            "cached, batched": run("cached, batched", rig.batched, cache),
            "cached, one per forward": run("cached, one per forward", rig.alone, cache),
            "uncached, batched": run("uncached, batched", rig.batched, None),
        },
        rounds,
    )
    after = rig.batched.stats()
    rates = {name: count / statistics.median(t) for name, t in times.items()}
    return {
        "imagesPerSecond": rates,
        "samples": times,
        "stats": {
            name: skipped(states) for name, states in last.items() if states[0].cache is not None
        },
        "batchedOverOnePerForward": rates["cached, batched"] / rates["cached, one per forward"],
        "cachedOverUncached": rates["cached, batched"] / rates["uncached, batched"],
        "batchedForwards": after["batchedForwards"] - before["batchedForwards"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=28)
    parser.add_argument("--threshold", type=float, default=0.9)
    parser.add_argument("--front-blocks", type=int, default=4)
    parser.add_argument("--lone-size", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--concurrent", type=int, default=8)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    from inline_core.families.zimage.kit import build_kit
    from inline_core.runtime.step_cache import StepCacheSettings

    cache = StepCacheSettings(threshold=args.threshold, front_blocks=args.front_blocks)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="inline-step-cache-bench-") as tmp:
        root = Path(tmp) / "models"
        build_kit(root, "mid", layouts=("diffusers",), dtype="float32")
        rig = Rig(root)
        try:
            alone = lone(rig, args.rounds, args.steps, args.lone_size, cache)
            many = concurrent(rig, args.rounds, args.steps, args.batch_size, args.concurrent, cache)
        finally:
            rig.close()
    load_after = os.getloadavg()

    s = alone["stats"]
    rows = [
        ("settings", json.dumps(cache.to_json())),
        ("load (1 min) before / after", f"{load_before[0]:.2f} / {load_after[0]:.2f}"),
        (
            f"lone {args.lone_size} px, {args.steps} steps, off",
            f"{alone['wallSeconds']['off']:.2f} s",
        ),
        (
            f"lone {args.lone_size} px, {args.steps} steps, on",
            f"{alone['wallSeconds']['on']:.2f} s",
        ),
        ("  reused steps / computed", f"{s['reusedSteps']} / {s['computedSteps']}"),
        ("  skipped blocks", f"{s['skippedBlocks']} of {alone['blocks']}"),
        ("  off / on, wall", f"{alone['wallOffOverOn']:.2f}x"),
        ("  off / on, forward time", f"{alone['forwardOffOverOn']:.2f}x"),
    ]
    for name, rate in many["imagesPerSecond"].items():
        rows.append((f"{args.concurrent} x {args.batch_size} px, {name}", f"{rate:.3f} img/s"))
    rows.append(("cached: batched / one per forward", f"{many['batchedOverOnePerForward']:.2f}x"))
    rows.append(("batched: cached / uncached", f"{many['cachedOverUncached']:.2f}x"))
    for name, st in many["stats"].items():
        rows.append(
            (
                f"  {name}: reused steps, skipped blocks",
                f"{st['reusedSteps']}, {st['skippedBlocks']}",
            )
        )
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    out: dict[str, Any] = {
        "machine": platform.platform(),
        "load": {"before": load_before, "after": load_after},
        "rounds": args.rounds,
        "steps": args.steps,
        "settings": cache.to_json(),
        "lone": alone,
        "concurrent": many,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
