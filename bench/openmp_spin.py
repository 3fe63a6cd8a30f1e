"""How long the compute threads spin at a barrier (GOMP_SPINCOUNT), side by side, alternated.

    .venv/bin/python bench/openmp_spin.py [--spins 300000,10000,1000] [--rounds 2]
        [--clients 16] [--seconds 12] [--real-size DIR] [--renders 8] [--busy 0]

For each setting in turn (A B C A B C ...), a real server (uvicorn, the CPU profile) started with
that GOMP_SPINCOUNT:
- tiny Z-Image renders (the `inline-core kit` models, 64 px, 4 steps) per second under `--clients`
  clients that each submit a render and watch it to its end (the server's own threads answer
  them while the loop computes);
- with `--real-size DIR` (the set `bench/real_size_cpu.py --models DIR --keep` builds): the median
  seed-only render of the imported ComfyUI workflow, and its median prompt change.
`--busy N` runs N busy-looping processes beside the servers (other work on the machine), so the
same run can be taken on a quiet machine and on a shared one. 300000 is libgomp's own default,
which the server keeps unless its environment says otherwise (`server/openmp.py`).

Prints a table (each setting's figures over its rounds, and its ratio to the first setting) and
writes bench/results/openmp_spin.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fleet import make_kit, render_load

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results" / "openmp_spin.json"

import real_size  # noqa: E402
import real_size_cpu  # noqa: E402

from tests.server.server_support import LiveServer  # noqa: E402


def tiny_renders_per_s(root: Path, models: Path, spin: int, clients: int, seconds: float) -> float:
    server = LiveServer(
        data_dir=root / f"data-{spin}-{time.monotonic_ns()}",
        models_dir=models,
        env={"GOMP_SPINCOUNT": str(spin)},
        name=f"spin-{spin}",
    )
    try:
        server.start()
        asyncio.run(render_load([server], clients, 4.0))  # loads the model, warms the paths
        began = time.perf_counter()
        latencies = asyncio.run(render_load([server], clients, seconds))
        return len(latencies) / (time.perf_counter() - began)
    finally:
        server.close()


def real_size_renders(models: Path, spin: int, renders: int, round_: int) -> dict[str, float]:
    """Median seed-only and prompt-change seconds through a server with `spin`."""
    prompts = real_size_cpu.PROMPTS
    with real_size.server(models, {"GOMP_SPINCOUNT": str(spin)}) as (base, _proc):
        real_size_cpu.render(base, prompts[0], 1)  # loads
        real_size_cpu.render(base, prompts[0], 2)
        seeds = [real_size_cpu.render(base, prompts[0], 3 + i) for i in range(renders)]
        offset = 100 + 10 * round_ + spin % 7  # prompts no earlier render encoded
        changes = [real_size_cpu.render(base, prompts[offset + i], 3) for i in range(3)]
    return {"seedOnlyS": statistics.median(seeds), "promptChangeS": statistics.median(changes)}


def busy_loop() -> None:
    while True:
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description="GOMP_SPINCOUNT settings side by side")
    parser.add_argument("--spins", default="300000,10000,1000")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=12.0)
    parser.add_argument("--real-size", type=Path, default=None, help="real_size_cpu.py's set")
    parser.add_argument("--renders", type=int, default=8)
    parser.add_argument("--busy", type=int, default=0, help="busy-looping processes beside")
    args = parser.parse_args()
    spins = [int(s) for s in str(args.spins).split(",")]
    busy = [multiprocessing.Process(target=busy_loop, daemon=True) for _ in range(args.busy)]
    for process in busy:
        process.start()
    load_before = os.getloadavg()
    tiny: dict[int, list[float]] = {spin: [] for spin in spins}
    real: dict[int, list[dict[str, float]]] = {spin: [] for spin in spins}
    try:
        with tempfile.TemporaryDirectory(prefix="openmp-spin-") as tmp:
            root = Path(tmp)
            models = root / "models"
            make_kit(models)
            for round_ in range(args.rounds):
                for spin in spins:
                    tiny[spin].append(
                        tiny_renders_per_s(root, models, spin, args.clients, args.seconds)
                    )
                    if args.real_size is not None:
                        real[spin].append(
                            real_size_renders(args.real_size, spin, args.renders, round_)
                        )
                    print(f"round {round_ + 1} spin {spin}: done", file=sys.stderr, flush=True)
    finally:
        for process in busy:
            process.kill()
    rows: list[dict[str, Any]] = []
    first = spins[0]
    tiny_first = statistics.median(tiny[first])
    for spin in spins:
        row: dict[str, Any] = {
            "spinCount": spin,
            "tinyRendersPerS": [round(v, 2) for v in tiny[spin]],
            "tinyOverFirst": round(statistics.median(tiny[spin]) / tiny_first, 3),
        }
        if real[spin]:
            seed = [r["seedOnlyS"] for r in real[spin]]
            prompt = [r["promptChangeS"] for r in real[spin]]
            first_seed = statistics.median(r["seedOnlyS"] for r in real[first])
            row |= {
                "realSeedOnlyS": [round(v, 3) for v in seed],
                "realPromptChangeS": [round(v, 3) for v in prompt],
                "realSeedOnlyOverFirst": round(statistics.median(seed) / first_seed, 3),
            }
        rows.append(row)
    print(f"{'spin':>8} {'tiny r/s (rounds)':>24} {'/first':>7} {'seed-only s':>18} {'/first':>7}")
    for row in rows:
        tiny_cell = " ".join(f"{v:.2f}" for v in row["tinyRendersPerS"])
        seed_cell = " ".join(f"{v:.3f}" for v in row.get("realSeedOnlyS", []))
        print(
            f"{row['spinCount']:>8} {tiny_cell:>24} {row['tinyOverFirst']:>7} {seed_cell:>18} "
            f"{row.get('realSeedOnlyOverFirst', ''):>7}"
        )
    result = {
        "machine": {"cpus": os.cpu_count()},
        "busyProcesses": args.busy,
        "clients": args.clients,
        "loadAverageBefore": [round(x, 2) for x in load_before],
        "loadAverageAfter": [round(x, 2) for x in os.getloadavg()],
        "rows": rows,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
