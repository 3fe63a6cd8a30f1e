"""Step-level batching on against off at the sampler, for `gpu_zimage.py` (issue 5).

N renders started at once (threads calling `StepLoopSampler.run`, as `batching.py`'s sampler path
does) on one Z-Image pipeline loaded as the server loads it (`families.standalone`). Two samplers
share that pipeline: "on" with the device's limits (or `max_batch`/`token_budget` when given),
"off" with `max_batch=1`. On and off alternate per round (`batching.compare`), so drift hits both
alike. Per size and N: throughput (images/s), p50/p95 latency and the on/off ratios.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from batching import PROMPTS, Render, compare, shape_of

from inline_core.config import Config
from inline_core.families.standalone import family_rig
from inline_core.families.zimage import ZImageFamily
from inline_core.sampling import SampleJob, StepLoopSampler


class SamplerPair:
    """One loaded pipeline, a batching sampler and a non-batching one."""

    def __init__(
        self,
        models: Path,
        device: str,
        profile: str | None,
        max_batch: int | None,
        token_budget: int | None,
    ) -> None:
        kind = "cuda" if device.startswith("cuda") else "cpu"
        self.on = StepLoopSampler(max_batch, token_budget, device=kind)
        self.off = StepLoopSampler(1, token_budget, device=kind)
        config = Config(models_dir=models, profile=profile)
        self.runner = family_rig(ZImageFamily, models, self.on, config=config)

    def render_with(self, sampler: StepLoopSampler) -> Render:
        def render(case: dict[str, Any], seed: int) -> float:
            pipeline = self.runner.pipeline(case["model"])
            side, steps = shape_of(case, 0)  # compare narrows each render to one shape
            state = pipeline.request(
                prompt=PROMPTS[seed % len(PROMPTS)],
                width=side,
                height=side,
                steps=steps,
                guidance=0.0,
                seed=seed,
            )
            started = time.perf_counter()
            sampler.run(SampleJob(pipeline, state))
            return (time.perf_counter() - started) * 1000

        return render

    def close(self) -> None:
        self.on.close()
        self.off.close()


def measure_batching(
    models: Path,
    cases: list[dict[str, Any]],
    levels: list[int],
    rounds: int,
    *,
    device: str,
    profile: str | None,
    max_batch: int | None = None,
    token_budget: int | None = None,
    min_images: int = 16,
) -> dict[str, Any]:
    """Rows of `batching.compare` for every case and N, with the limits and sampler counters;
    each round renders at least `min_images` per setting (waves of N)."""
    pair = SamplerPair(models, device, profile, max_batch, token_budget)
    on, off = pair.render_with(pair.on), pair.render_with(pair.off)
    rows: list[dict[str, Any]] = []
    try:
        for i, case in enumerate(cases):
            on(case, 10_000 + 2 * i)  # load the model, warm the kernels at this size
            off(case, 10_001 + 2 * i)
            for n in levels:
                rows.append(compare("sampler", case, n, on, off, rounds, min_images))
        stats = {"on": pair.on.stats(), "off": pair.off.stats()}
    finally:
        pair.close()
    limits = pair.on.limits
    return {
        "rounds": rounds,
        "minImagesPerRound": min_images,
        "limitsOn": {"maxBatch": limits.max_batch, "tokenBudget": limits.token_budget},
        "samplerStats": stats,
        "rows": rows,
    }


def print_table(rows: list[dict[str, Any]]) -> None:
    print(
        f"{'px':>5} {'N':>3} {'img/s on':>9} {'off':>8} {'x':>6} | {'p50 on':>9} {'off':>9}"
        f" {'x':>6} | {'p95 on':>9} {'off':>9} {'x':>6}"
    )
    for r in rows:
        on, off = r["on"], r["off"]
        print(
            f"{r['shapes'][0]['px']:>5} {r['n']:>3}"
            f" {on['imagesPerS']:>9.3f} {off['imagesPerS']:>8.3f}"
            f" {r['throughputRatio']:>6.2f} | {on['p50Ms']:>9.1f} {off['p50Ms']:>9.1f}"
            f" {r['p50Ratio']:>6.2f} | {on['p95Ms']:>9.1f} {off['p95Ms']:>9.1f}"
            f" {r['p95Ratio']:>6.2f}"
        )
