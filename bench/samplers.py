"""The sigma library's samplers against `euler`: model calls per step and the sampler's own
arithmetic per call, on a latent of a real render's size (what a sampler adds to a step beside
the forward, which is the same for all of them); the CFG++ samplers with an unconditional output
beside the guided one. Then a request's schedule setup (once per request) at the model's own
shift against its own `shift` and `mu` (ModelSamplingFlux's table is 10000 entries).

    .venv/bin/python bench/samplers.py [--steps 20] [--size 128] [--rounds 3]

The model is a stand-in (one cheap elementwise op), so the time is the sampler's: its updates,
its history, its noise draws (ancestral/SDE samplers draw each row's noise on the CPU from the
row's own generator). Samplers alternate per round so drift on a shared machine hits each alike.
Prints a table, writes bench/results/samplers.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch

from inline_core.diffusion.flow.schedule import FlowMatchSchedule
from inline_core.diffusion.sigma.noise import RowNoise, row_generator
from inline_core.diffusion.sigma.sampling import FlowSampling
from inline_core.diffusion.sigma.schedules import schedule_sigmas
from inline_core.diffusion.sigma.shift import ModelShift
from inline_core.diffusion.sigma.stepper import SigmaStepper
from inline_core.graph.sampler_names import CFG_PP_SAMPLERS, SIGMA_SAMPLERS

SAMPLERS = SIGMA_SAMPLERS + CFG_PP_SAMPLERS
# Z-Image's scheduler config: a fixed shift of 3.
CONFIG = {"shift": 3.0, "use_dynamic_shifting": False, "num_train_timesteps": 1000}
SHIFTS: dict[str, ModelShift | None] = {
    "own (3)": None,
    "shift 6": ModelShift(shift=6.0),
    "mu 1.15": ModelShift(mu=1.15),
}

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "samplers.json"


def one_render(name: str, sigmas: list[float], x: torch.Tensor) -> tuple[float, int]:
    """Seconds spent in the sampler over a whole render, and its model calls."""
    sampling = FlowSampling(3.0)
    stepper = SigmaStepper(name, sampling, sigmas, x, RowNoise([row_generator(1)]))
    spent, calls = 0.0, 0
    while stepper.result is None:
        point, _sigma = stepper.call
        output = point * 0.5  # the stand-in model, outside the timed part
        uncond = point * 0.4 if name in CFG_PP_SAMPLERS else None
        start = time.perf_counter()
        stepper.advance(output, None, uncond)
        spent += time.perf_counter() - start
        calls += 1
    return spent, calls


def setup_ms(steps: int, rounds: int) -> dict[str, float]:
    """Milliseconds to make one request's schedule (its sigmas and its sampler's dry run), at
    each of `SHIFTS`, alternating per round after one warm-up each."""
    spent: dict[str, list[float]] = {label: [] for label in SHIFTS}
    for r in range(rounds + 1):
        for label, shift in SHIFTS.items():
            start = time.perf_counter()
            FlowMatchSchedule.create(CONFIG, steps, 4096, torch.device("cpu"), shift=shift)
            if r:
                spent[label].append(time.perf_counter() - start)
    return {label: statistics.median(times) * 1e3 for label, times in spent.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--size", type=int, default=128, help="latent side (1024 px / 8)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    sigmas = schedule_sigmas("simple", FlowSampling(3.0), args.steps)
    x = torch.randn((1, 16, args.size, args.size), generator=torch.Generator().manual_seed(0))
    times: dict[str, list[float]] = {name: [] for name in SAMPLERS}
    calls: dict[str, int] = {}
    for _ in range(args.rounds):
        for name in SAMPLERS:
            spent, count = one_render(name, sigmas, x)
            times[name].append(spent / count)
            calls[name] = count
    euler = statistics.median(times["euler"])
    rows: list[dict[str, object]] = []
    print(f"{'sampler':<26}{'calls/step':>11}{'ms/call':>10}{'x euler':>9}")
    for name in SAMPLERS:
        per_call = statistics.median(times[name])
        per_step, ms, ratio = calls[name] / args.steps, per_call * 1e3, per_call / euler
        rows.append({"sampler": name, "callsPerStep": per_step, "msPerCall": ms, "vsEuler": ratio})
        print(f"{name:<26}{per_step:>11.2f}{ms:>10.2f}{ratio:>9.2f}")
    setups = setup_ms(args.steps, args.rounds)
    own = setups["own (3)"]
    print(f"\n{'schedule setup':<26}{'ms/request':>11}{'x own':>9}")
    for label, ms in setups.items():
        print(f"{label:<26}{ms:>11.2f}{ms / own:>9.2f}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "steps": args.steps,
                "latent": [1, 16, args.size, args.size],
                "machine": platform.machine(),
                "rows": rows,
                "scheduleSetupMs": setups,
                "load": os.getloadavg()[0],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
