"""How long a cancel takes to end a long render, through the real server.

Run by hand: `python bench/cancel_latency.py [--against /work/main/src] [--trials 3] [--size 1024]`.

The kit's `mid` Z-Image (random weights: 768 wide, 10 main and 4 refiner blocks) renders SIZE x
SIZE (1024 unless given) with 50 steps on the CPU. Each trial submits that render, waits until
it has finished two steps (the step period is read from them), waits a further fraction of a step
so the cancel lands anywhere in a forward, then `DELETE /v1/runs/{id}` and polls until the run is
`cancelled`, and until the step loop holds no job (`/v1/health`'s sampler: the device is free
for the next render). Both are timed from the DELETE.

With `--against SRC` a second server runs that checkout's code (e.g. main's, where a cancel waits
for the step to end) and the trials alternate between the two, so both see the same machine load;
the medians are compared as a ratio. Prints a table, writes bench/results/cancel_latency.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from server_process import ServerProcess, start_server

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "cancel_latency.json"
STEPS = 50


def graph(seed: int, size: int) -> dict[str, Any]:
    return {
        "target": "img",
        "graph": {
            "schemaVersion": 1,
            "nodes": [
                {"id": "p", "type": "input/text", "params": {"text": "a lighthouse at dusk"}},
                {
                    "id": "img",
                    "type": "alibaba/z-image-turbo",
                    "params": {"width": size, "height": size, "steps": STEPS, "seed": seed},
                    "inputs": {"prompt": {"from": "p", "output": "text"}},
                },
            ],
        },
    }


def step_of(base: str, run_id: str) -> int:
    state = httpx.get(f"{base}/v1/runs/{run_id}", timeout=10).json()
    return int(state["nodes"].get("img", {}).get("step") or 0)


def trial(base: str, seed: int, size: int, rng: random.Random) -> dict[str, float]:
    run_id = httpx.post(base + "/v1/runs", json=graph(seed, size), timeout=30).json()["runId"]
    while step_of(base, run_id) < 1:
        time.sleep(0.05)
    first = time.monotonic()
    while step_of(base, run_id) < 2:
        time.sleep(0.05)
    period = time.monotonic() - first
    time.sleep(rng.uniform(0, period))  # anywhere in the next forward
    asked = time.monotonic()
    httpx.delete(f"{base}/v1/runs/{run_id}", timeout=600)
    cancelled = free = None
    while cancelled is None or free is None:
        now = time.monotonic() - asked
        if cancelled is None:
            status = httpx.get(f"{base}/v1/runs/{run_id}", timeout=10).json()["status"]
            cancelled = now if status == "cancelled" else None
        if free is None:
            free = now if sampler(base)["activeJobs"] == 0 else None
        time.sleep(0.02)
    stats = sampler(base)
    return {
        "latency_s": cancelled,
        "device_free_s": free,  # the step loop holds no job: the next render may start
        "step_s": period,
        "mean_forward_s": stats["forwardSeconds"] / max(1, stats["forwards"]),
    }


def sampler(base: str) -> dict[str, Any]:
    return httpx.get(base + "/v1/health", timeout=10).json()["sampler"]


def main() -> None:
    parser = argparse.ArgumentParser(description="Cancel latency of a long render.")
    parser.add_argument("--against", type=Path, help="another checkout's src/ to compare with")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--size", type=int, default=1024, help="the render's width and height")
    args = parser.parse_args()
    sides = {"this": ROOT / "src"}
    if args.against is not None:
        sides["against"] = args.against.resolve()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory(prefix="cancel-latency-") as tmp:
        root = Path(tmp)
        models = root / "models"
        subprocess.run(
            [sys.executable, "-m", "inline_core.cli", "kit", "--out", str(models), "--size", "mid"],
            check=True,
            capture_output=True,
            env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        )
        servers: dict[str, ServerProcess] = {
            name: start_server(
                models, root / f"data-{name}", root / f"{name}.log", src=src, clean_env=True
            )
            for name, src in sides.items()
        }
        rows: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
        try:
            for seed in range(args.trials):
                for name, server in servers.items():
                    rows[name].append(trial(server.base, seed, args.size, rng))
        finally:
            for server in servers.values():
                server.stop()
    load = os.getloadavg()[0]
    print(
        f"{'side':<8} {'step s':>8} {'forward s':>10} {'cancelled s':>12} {'max':>6} "
        f"{'device free s':>14} {'max':>6}"
    )
    summary: dict[str, Any] = {}
    for name, trials in rows.items():
        latency = [t["latency_s"] for t in trials]
        free = [t["device_free_s"] for t in trials]
        step = statistics.median(t["step_s"] for t in trials)
        forward = statistics.median(t["mean_forward_s"] for t in trials)
        summary[name] = {
            "src": str(sides[name]),
            "trials": trials,
            "step_median_s": step,
            "latency_median_s": statistics.median(latency),
            "device_free_median_s": statistics.median(free),
        }
        print(
            f"{name:<8} {step:>8.2f} {forward:>10.2f} {statistics.median(latency):>12.2f} "
            f"{max(latency):>6.2f} {statistics.median(free):>14.2f} {max(free):>6.2f}"
        )
    if "against" in summary:
        for what in ("latency", "device_free"):
            ratio = summary["against"][f"{what}_median_s"] / summary["this"][f"{what}_median_s"]
            summary[f"{what}_ratio_against_over_this"] = ratio
            print(f"{what}, against / this (medians): {ratio:.1f}x")
        print(f"load average {load:.1f}")
    summary.update(size=args.size, steps=STEPS, model="zimage mid (kit)", load_average=load)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
