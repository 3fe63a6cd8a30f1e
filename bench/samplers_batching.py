"""Samplers on a real (random-weight) Z-Image kit model: a lone render's time per step for each
sampler against `euler` (forwards included: a multistep sampler costs no extra forward, a
two-stage one two), each CFG++ sampler guided against guided `euler` (it reads the negative
row the guidance computes anyway), a request's own shift (`shift`, `mu`) against `euler` at the
model's own, then eight renders with eight different samplers and schedules, batching off (one
forward per request) against on (they share forwards).

    .venv/bin/python bench/samplers_batching.py [--size tiny|mid] [--px 128] [--steps 8]
        [--rounds 2] [--threads 1] [--rows all|new]

`--rows new` times only the CFG++ and shift rows with their baselines (and the batching).

Samplers alternate per round so drift on a shared machine hits each alike; each figure is the
round's median. Prints two tables, writes bench/results/samplers_batching.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from inline_core.families.standalone import family_rig
from inline_core.families.zimage import ZImageFamily
from inline_core.families.zimage.kit import build_kit
from inline_core.graph.sampler_names import CFG_PP_SAMPLERS, SIGMA_SAMPLERS
from inline_core.sampling import SampleJob, StepLoopSampler

RESULTS = Path(__file__).resolve().parent / "results" / "samplers_batching.json"
MIXED = [
    ("euler", "simple"),
    ("euler_ancestral", "karras"),
    ("heun", "normal"),
    ("uni_pc_bh2", "beta"),
    ("dpmpp_2m_sde", "exponential"),
    ("dpmpp_sde", "sgm_uniform"),
    ("uni_pc", "kl_optimal"),
    ("er_sde", "linear_quadratic"),
]
GUIDED: dict[str, Any] = {"guidance": 2.0, "negative_prompt": "blurry"}  # ComfyUI's cfg 3


class Row:
    """One lone-render row: its sampler, the request's other settings, the row it is held to."""

    def __init__(self, label: str, sampler: str, settings: dict[str, Any], baseline: str) -> None:
        self.label, self.sampler, self.settings, self.baseline = label, sampler, settings, baseline


def rows_of(which: str) -> list[Row]:
    plain = [Row(name, name, {}, "euler") for name in SIGMA_SAMPLERS]
    guided = [Row("euler cfg 3", "euler", GUIDED, "euler cfg 3")]
    guided += [Row(f"{name} cfg 3", name, GUIDED, "euler cfg 3") for name in CFG_PP_SAMPLERS]
    shifted = [
        Row("euler shift 6", "euler", {"shift": 6.0}, "euler"),
        Row("euler mu 1.15", "euler", {"mu": 1.15}, "euler"),
    ]
    return (plain if which == "all" else plain[:1]) + guided + shifted


class Rig:
    def __init__(self, models: Path, model: str, max_batch: int | None) -> None:
        self.sampler = StepLoopSampler(max_batch=max_batch)
        self.pipeline = family_rig(ZImageFamily, models, self.sampler).pipeline(model)

    def job(
        self,
        sampler: str,
        schedule: str,
        px: int,
        steps: int,
        seed: int,
        settings: dict[str, Any] | None = None,
    ) -> SampleJob:
        request: Any = self.pipeline.request(
            prompt="a fox",
            width=px,
            height=px,
            steps=steps,
            seed=seed,
            sampler=sampler,
            sigma_schedule=schedule,
            **{"guidance": 0.0, **(settings or {})},
        )
        return SampleJob(self.pipeline, request)

    def close(self) -> None:
        self.sampler.close()


def lone(rig: Rig, px: int, steps: int, rounds: int, rows: list[Row]) -> list[dict[str, Any]]:
    times: dict[str, list[float]] = {row.label: [] for row in rows}
    forwards: dict[str, int] = {}
    for r in range(rounds):
        for row in rows:
            before = rig.sampler.stats()["forwards"]
            start = time.perf_counter()
            rig.sampler.run(rig.job(row.sampler, "simple", px, steps, r, row.settings))
            times[row.label].append((time.perf_counter() - start) / steps)
            forwards[row.label] = rig.sampler.stats()["forwards"] - before
    return [
        {
            "row": row.label,
            "sampler": row.sampler,
            "settings": row.settings,
            "forwardsPerStep": forwards[row.label] / steps,
            "msPerStep": round(statistics.median(times[row.label]) * 1e3, 2),
            "vs": row.baseline,
            "ratio": round(
                statistics.median(times[row.label]) / statistics.median(times[row.baseline]), 3
            ),
        }
        for row in rows
    ]


def mixed(models: Path, model: str, px: int, steps: int, rounds: int) -> dict[str, Any]:
    """Eight renders at once, batching off (max batch 1) and on, alternating per round."""
    walls: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(rounds):
        for mode, max_batch in (("off", 1), ("on", None)):
            rig = Rig(models, model, max_batch)
            try:
                rig.sampler.run(rig.job("euler", "simple", px, 1, seed=0))  # warm
                start = time.perf_counter()
                futures = [
                    rig.sampler.submit(rig.job(name, schedule, px, steps, seed=i))
                    for i, (name, schedule) in enumerate(MIXED)
                ]
                for future in futures:
                    future.result(timeout=1800)
                walls[mode].append(time.perf_counter() - start)
            finally:
                rig.close()
    off, on = statistics.median(walls["off"]), statistics.median(walls["on"])
    return {"offS": round(off, 3), "onS": round(on, 3), "speedup": round(off / on, 3)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="tiny", choices=["tiny", "mid"])
    parser.add_argument("--px", type=int, default=128)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rows", default="all", choices=["all", "new"])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        models = Path(tmp) / "models"
        build_kit(models, args.size, layouts=("diffusers",), dtype="float32")
        model = f"zimage_{args.size}_diffusers"
        rig = Rig(models, model, None)
        try:
            rig.sampler.run(rig.job("euler", "simple", args.px, 1, seed=0))  # warm
            rows = lone(rig, args.px, args.steps, args.rounds, rows_of(args.rows))
        finally:
            rig.close()
        batching = mixed(models, model, args.px, args.steps, args.rounds)
    print(f"{'row':<38}{'fwd/step':>9}{'ms/step':>10}{'ratio':>8}  vs")
    for row in rows:
        print(
            f"{row['row']:<38}{row['forwardsPerStep']:>9.2f}"
            f"{row['msPerStep']:>10.2f}{row['ratio']:>8.3f}  {row['vs']}"
        )
    print(
        f"\n8 mixed samplers at once: batching off {batching['offS']} s, "
        f"on {batching['onS']} s, speedup {batching['speedup']}x"
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "size": args.size,
                "px": args.px,
                "steps": args.steps,
                "threads": args.threads,
                "machine": platform.machine(),
                "load": os.getloadavg()[0],
                "lone": rows,
                "mixed": dict(batching, samplers=MIXED),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
