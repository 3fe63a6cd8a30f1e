"""A server started cold against one started warm on the real-size Z-Image set: the memory and
prompt-change gap issue 38 found beside ComfyUI (after a cold start the server kept about 1.8
GiB more anonymous memory, 5.8 against 4.0-4.2 GiB, and a prompt change stayed 15-25% slower).

    .venv/bin/python bench/cold_start_memory.py [--models DIR] [--changes 3] [--rounds 1]
        [--dtype float32]

Per round, two servers one after another on the set `bench/real_size_cpu.py` builds (reused
when there): cold (the set's files dropped from the page cache just before it starts:
`posix_fadvise`, no root needed, nothing else evicted), then warm (the files as the cold one left
them cached). Each renders the set's ComfyUI workflow once (the load) and `--changes` times with
a new prompt, 64 px, 4 steps, as `real_size_cpu.py` does; its anonymous and file-backed RSS are
polled (peak, and at the end), with the pages it read from disk. `--dtype float32` by default:
the issue's machine (AVX2, no bf16) computes in float32, so its text encoder stays bf16 and mapped
(its float32 copy is over half the budget) and its transformer is a float32 copy. Prints a table
with the load average; writes bench/results/cold_start_memory.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT), str(ROOT / "bench")]
OUT = ROOT / "bench" / "results" / "cold_start_memory.json"
GIB = 1024**3


def one_server(models: Path, cold: bool, changes: int, dtype: str, round_: int) -> dict[str, Any]:
    from real_size import RssPeaks, drop_cached, server
    from real_size_cpu import render

    if cold:
        drop_cached(models)
    env = {"INLINE_DTYPE": dtype, "GOMP_SPINCOUNT": "0", "OMP_WAIT_POLICY": "passive"}
    with server(models, env) as (base, proc):
        peaks = RssPeaks(proc.pid)
        try:
            first = render(base, f"a lighthouse, round {round_}", 1)
            prompt_changes = [
                render(base, f"a lighthouse on a cliff, round {round_} change {i}", 2 + i)
                for i in range(changes)
            ]
            anon, file = peaks.now()
            faults = peaks.major_faults()
        finally:
            peaks.close()
    return {
        "start": "cold" if cold else "warm",
        "firstS": round(first, 1),
        "promptChangeS": [round(s, 1) for s in prompt_changes],
        "promptChangeMedianS": round(statistics.median(prompt_changes), 1),
        "anonGib": round(anon / GIB, 2),
        "peakAnonGib": round(peaks.anon / GIB, 2),
        "fileGib": round(file / GIB, 2),
        "majorFaults": faults,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    default_models = Path(tempfile.gettempdir()) / "inline-real-size-set"
    parser.add_argument("--models", type=Path, default=default_models)
    parser.add_argument("--changes", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--dtype", default="float32")
    args = parser.parse_args()
    from real_size_cpu import build_set

    build_set(args.models)
    load = os.getloadavg()[0]
    print(f"{os.cpu_count()} CPUs, {args.dtype}, load {load:.1f}")
    rows = [
        one_server(args.models, cold, args.changes, args.dtype, round_)
        for round_ in range(args.rounds)
        for cold in (True, False)
    ]
    print(
        f"{'start':6s} {'first s':>8s} {'change s':>9s} {'anon GiB':>9s} {'peak anon':>10s}"
        f" {'file GiB':>9s} {'major faults':>13s}"
    )
    for row in rows:
        print(
            f"{row['start']:6s} {row['firstS']:8.1f} {row['promptChangeMedianS']:9.1f}"
            f" {row['anonGib']:9.2f} {row['peakAnonGib']:10.2f} {row['fileGib']:9.2f}"
            f" {row['majorFaults']:13d}"
        )
    end = os.getloadavg()[0]
    print(f"load {end:.1f} at the end")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    body = {
        "cpus": os.cpu_count(),
        "dtype": args.dtype,
        "changes": args.changes,
        "loadAverage": {"start": round(load, 2), "end": round(end, 2)},
        "rows": rows,
    }
    OUT.write_text(json.dumps(body, indent=2) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
