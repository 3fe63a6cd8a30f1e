"""SkyReels-V2 in chunks on the tiny kit (CPU): time to the first playable chunk against the whole
video, and chunk step grouping on and off at 4 concurrent long renders.

    .venv/bin/python bench/skyreels_chunks.py [--repeats 2]

"First playable" is when the first chunk's frames are decoded (handed to `on_chunk`, as a
streaming client gets them). The 4 concurrent renders have four widths, so no two share a forward:
with grouping each runs its chunk's steps back to back while no one could share them; without,
the loop takes turns step by step. Prints a table and writes bench/results/skyreels_chunks.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from inline_core.config import Config
from inline_core.families.skyreels import SkyReelsFamily
from inline_core.families.skyreels.kit import FOLDER, build_kit
from inline_core.families.standalone import family_rig
from inline_core.sampling.job import SampleJob
from inline_core.sampling.loop import StepLoopSampler

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "skyreels_chunks.json"
LONG: dict[str, Any] = {"height": 32, "frames": 37, "base_frames": 9, "overlap": 5, "steps": 4}
WIDTHS = (48, 64, 80, 96)


def render_all(models: Path, grouping: bool, widths: tuple[int, ...]) -> dict[str, float]:
    """Renders of `widths` at once: each one's first playable chunk and end, from the start."""
    sampler = StepLoopSampler(chunk_grouping=grouping)
    config = Config(models_dir=models, profile="cpu", dtype="float32")
    try:
        pipeline: Any = family_rig(SkyReelsFamily, models, sampler, config=config).pipeline(FOLDER)
        sampler.run(
            SampleJob(
                pipeline,
                pipeline.request(
                    prompt="warm", width=48, seed=0, guidance=1.0, **{**LONG, "frames": 9}
                ),
            )
        )
        firsts: dict[int, float] = {}
        lock = threading.Lock()
        start = time.perf_counter()

        def job(i: int, width: int) -> SampleJob:
            state = pipeline.request(
                prompt=f"render {i}", width=width, seed=i, guidance=1.0, **LONG
            )

            def on_chunk(first: int, frames: Any, total: int) -> None:
                with lock:
                    firsts.setdefault(i, time.perf_counter() - start)

            state.on_chunk = on_chunk
            return SampleJob(pipeline, state)

        futures = [sampler.submit(job(i, w)) for i, w in enumerate(widths)]
        ends: list[float] = []
        for f in futures:
            f.result(timeout=600)
            ends.append(time.perf_counter() - start)
        stats = sampler.stats()
    finally:
        sampler.close()
    return {
        "first_chunk_mean_s": statistics.mean(firsts.values()),
        "first_chunk_min_s": min(firsts.values()),
        "whole_mean_s": statistics.mean(ends),
        "whole_max_s": max(ends),
        "grouped_steps": float(stats["groupedSteps"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        models = build_kit(Path(tmp) / "models").root
        rows: dict[str, list[dict[str, float]]] = {"alone": [], "4 grouped": [], "4 ungrouped": []}
        for _ in range(int(args.repeats)):  # side by side, alternating, on a noisy machine
            rows["alone"].append(render_all(models, True, WIDTHS[:1]))
            rows["4 grouped"].append(render_all(models, True, WIDTHS))
            rows["4 ungrouped"].append(render_all(models, False, WIDTHS))
    out: dict[str, dict[str, float]] = {}
    print(f"{'case':<12} {'first chunk':>12} {'(min)':>8} {'whole':>8} {'(max)':>8} {'grouped':>8}")
    for name, runs in rows.items():
        mean = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        out[name] = mean
        print(
            f"{name:<12} {mean['first_chunk_mean_s']:>11.2f}s {mean['first_chunk_min_s']:>7.2f}s "
            f"{mean['whole_mean_s']:>7.2f}s {mean['whole_max_s']:>7.2f}s "
            f"{int(mean['grouped_steps']):>8}"
        )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
