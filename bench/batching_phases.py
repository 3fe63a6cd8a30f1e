"""Where a job's encode and decode should run: off the step loop (the default) or on it.

    .venv/bin/python bench/batching_phases.py [--n 8,16] [--rounds 3]

At the sampler (no server), N concurrent tiny Z-Image renders (64 px, 8 steps, batching on) with
the phases placed three ways: `caller` with one phase slot (the default: encode/decode on the
submitting threads, one at a time, overlapping the denoise loop), `caller` with two slots, and
`loop` (encode/decode on the loop thread between steps). Reports throughput and p50/p95 latency per
placement, and the stall the loop saw: the longest gap between two forwards. Writes
bench/results/batching_phases.json.
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

from batching import timed_threads

RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results" / "batching_phases.json"
PLACEMENTS: list[tuple[str, str, int]] = [
    ("caller, 1 slot", "caller", 1),
    ("caller, 2 slots", "caller", 2),
    ("loop", "loop", 1),
]


class Timed:
    """Delegates to a real pipeline and notes when each forward starts and ends."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.serial_phases = False
        self.gaps: list[float] = []
        self._last_end: float | None = None

    def prepare_encode(self, state: Any, /) -> Any:
        return self.inner.prepare_encode(state)

    def denoise_step(self, states: Any, /) -> Any:
        start = time.perf_counter()
        if self._last_end is not None:
            self.gaps.append(start - self._last_end)
        out = self.inner.denoise_step(states)
        self._last_end = time.perf_counter()
        return out

    def step_scheduler(self, state: Any, noise_pred: Any, /) -> None:
        self.inner.step_scheduler(state, noise_pred)

    def post_decode(self, state: Any, /) -> Any:
        return self.inner.post_decode(state)

    # Batched decode passes through, so the sampler batches decodes as it does unwrapped.
    def decode_key(self, state: Any, /) -> Any:
        return self.inner.decode_key(state)

    def decode_pixels(self, state: Any, /) -> int:
        return int(self.inner.decode_pixels(state))

    def post_decode_many(self, states: Any, /) -> Any:
        return self.inner.post_decode_many(states)


def load(models: Path) -> Any:
    from inline_core.families.standalone import family_rig
    from inline_core.families.zimage import ZImageFamily
    from inline_core.families.zimage.kit import build_kit
    from inline_core.sampling import StepLoopSampler

    build_kit(models, "tiny", layouts=("comfy",))
    return family_rig(ZImageFamily, models, StepLoopSampler()).pipeline()


def one_round(pipeline: Any, phases: str, slots: int, n: int, seed0: int) -> dict[str, Any]:
    from inline_core.sampling import SampleJob, StepLoopSampler

    timed = Timed(pipeline)
    sampler = StepLoopSampler(phases=cast(Any, phases), phase_slots=slots)
    latencies: list[float] = [0.0] * n
    barrier = threading.Barrier(n)

    def render(i: int) -> None:
        state = pipeline.request(
            prompt=f"a lighthouse, variation {i}",
            width=64,
            height=64,
            steps=8,
            guidance=0.0,
            seed=seed0 + i,
        )
        barrier.wait()
        t0 = time.perf_counter()
        sampler.run(SampleJob(timed, state))
        latencies[i] = (time.perf_counter() - t0) * 1000

    wall = timed_threads(render, n)
    sampler.close()
    return {
        "wallS": wall,
        "latenciesMs": latencies,
        "maxGapMs": max(timed.gaps, default=0.0) * 1000,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", default="8,16")
    parser.add_argument("--rounds", type=int, default=3)
    # One intra-op thread by default: on this shared 2-core machine a descheduled OpenMP worker
    # stalls every parallel region (measured: 8 tiny steps 1.5-5 s with 2 threads, 0.18 s with 1).
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(cast(int, args.threads))
    levels = [int(x) for x in cast(str, args.n).split(",")]
    rounds = cast(int, args.rounds)
    pipeline = load(Path(tempfile.mkdtemp(prefix="phases-")) / "models")
    one_round(pipeline, "caller", 1, 2, 0)  # warm-up
    rows: list[dict[str, Any]] = []
    for n in levels:
        samples: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in PLACEMENTS}
        for r in range(rounds):  # placements interleaved per round: drift hits all alike
            for name, phases, slots in PLACEMENTS:
                samples[name].append(one_round(pipeline, phases, slots, n, 100 * r))
        for name, _, _ in PLACEMENTS:
            got = samples[name]
            lat = sorted(x for s in got for x in s["latenciesMs"])
            row = {
                "n": n,
                "placement": name,
                "imagesPerS": round(statistics.median(n / s["wallS"] for s in got), 3),
                "p50Ms": round(statistics.median(lat), 1),
                "p95Ms": round(lat[min(len(lat) - 1, int(0.95 * len(lat)))], 1),
                "maxLoopGapMs": round(statistics.median(s["maxGapMs"] for s in got), 1),
            }
            rows.append(row)
            print(
                f"N={n:<3} {name:16} img/s {row['imagesPerS']:7.3f}  p50 {row['p50Ms']:8.1f} ms"
                f"  p95 {row['p95Ms']:8.1f} ms  longest loop gap {row['maxLoopGapMs']:7.1f} ms",
                flush=True,
            )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"rounds": rounds, "rows": rows}, indent=2) + "\n")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
