"""A whole Z-Image render, compiled against eager, side by side in one process: the prompt's
encode, every step and the VAE decode, through the Z-Image node's own runner (the server's
stacks, step loop and take store) on the real-size random set of `bench/real_size_cpu.py`.

    .venv/bin/python bench/compile_render.py [--models DIR] [--renders 3] [--px 64] [--steps 4]
        [--dtype bfloat16]

The set (the full-width transformer at one main layer, the full Qwen3-4B text encoder, the FLUX
VAE; about 10 GB) is built into `--models` unless there (default: a folder under the temporary
directory, kept for the next run). One runtime with compile on (`compile=True`, as `--compile`
sets it): the transformer's blocks and the VAE decoder's blocks compiled. Its first render
compiles (timed: inductor's cache is `--cache`, kept between runs). Then `--renders` pairs each
way, eager (`torch.compiler.set_stance("force_eager")`: the same weights, the same stacks) and
compiled alternating, so both see the same load:
- a prompt change: a new prompt each render (its encode, the steps, the decode);
- a seed-only render: the prompt's encode cached, a new seed (the steps and the decode).
Each render's phases are timed from its progress events (encode, sample, decode); the takes of
one seed and prompt are compared pixel by pixel. `--profile`: where one seed-only render's time
goes each way (torch.profiler's top operators by self CPU time, every thread). Prints medians and
ratios and the load average; writes bench/results/compile_render.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]  # this checkout's code, whatever is installed
OUT = ROOT / "bench" / "results" / "compile_render.json"
PHASES = ("encode", "sample", "decode", "save")


@contextmanager
def eager_if(eager: bool) -> Generator[None]:
    import torch

    with torch.compiler.set_stance("force_eager" if eager else "default"):
        yield


def timed_render(
    rig: Any, takes: Path, prompt: str, seed: int, args: Any, eager: bool
) -> dict[str, Any]:
    """One render; its wall time, each phase's seconds and its pixels."""
    from inline_core.runtime.progress import Progress, RunEvent
    from tests.families.zimage.zimage_harness import render, take_pixels

    marks: dict[str, float] = {}

    def on_event(event: RunEvent) -> None:
        if isinstance(event, Progress) and event.phase in PHASES:
            marks.setdefault(event.phase, time.perf_counter())

    with eager_if(eager):
        began = time.perf_counter()
        result = render(
            rig,
            takes,
            prompt,
            on_event=on_event,
            seed=seed,
            steps=args.steps,
            width=args.px,
            height=args.px,
            guidance=0.0,
        )
        ended = time.perf_counter()
    encode = marks["sample"] - marks.get("encode", marks["sample"])
    return {
        "wallS": ended - began,
        "encodeS": encode,
        "stepsS": marks["decode"] - marks["sample"],
        "decodeS": marks["save"] - marks["decode"],
        "pixels": take_pixels(result),
    }


def medians(renders: list[dict[str, Any]]) -> dict[str, float]:
    keys = ("wallS", "encodeS", "stepsS", "decodeS")
    return {key: round(statistics.median(r[key] for r in renders), 3) for key in keys}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    default_models = Path(tempfile.gettempdir()) / "inline-real-size-set"
    parser.add_argument("--models", type=Path, default=default_models)
    parser.add_argument(
        "--cache", default=str(Path(tempfile.gettempdir()) / "inline-compile-render")
    )
    parser.add_argument("--renders", type=int, default=3)
    parser.add_argument("--px", type=int, default=64)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--profile", action="store_true", help="profile a seed-only render")
    args = parser.parse_args()
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = args.cache  # before anything compiles

    from compile_zimage import top_ops
    from real_size_cpu import build_set

    from inline_core.config import Config
    from inline_core.families.standalone import family_rig
    from inline_core.families.zimage import ZImageFamily
    from inline_core.sampling.loop import StepLoopSampler

    built = build_set(args.models)
    load = os.getloadavg()[0]
    print(f"cpu {args.dtype}, {os.cpu_count()} CPUs, load {load:.1f}; set built {built or 'kept'}")
    sampler = StepLoopSampler()
    with tempfile.TemporaryDirectory(prefix="compile-render-") as data:
        config = Config(
            models_dir=args.models,
            data_dir=Path(data),
            profile="cpu",
            dtype=args.dtype,
            compile=True,
        )
        rig = family_rig(ZImageFamily, args.models, sampler, config=config)
        takes = Path(data) / "takes"
        try:
            first_eager = timed_render(rig, takes, "a lighthouse, warm-up", 1, args, eager=True)
            first = timed_render(rig, takes, "a lighthouse, warm-up", 1, args, eager=False)
            prompt_change: dict[str, list[dict[str, Any]]] = {"eager": [], "compiled": []}
            seed_only: dict[str, list[dict[str, Any]]] = {"eager": [], "compiled": []}
            diffs: list[int] = []
            for i in range(args.renders):
                for way in ("eager", "compiled"):  # the same prompt and seed each way
                    prompt = f"a lighthouse on a cliff at dusk, study {i} {way}"
                    prompt_change[way].append(
                        timed_render(rig, takes, prompt, 100 + i, args, way == "eager")
                    )
                pair = [
                    timed_render(rig, takes, "a lighthouse", 200 + i, args, e)
                    for e in (True, False)
                ]
                seed_only["eager"].append(pair[0])
                seed_only["compiled"].append(pair[1])
                diffs.append(int(abs(pair[0]["pixels"] - pair[1]["pixels"]).max()))
            profiles = {
                way: top_ops(
                    lambda e=way == "eager": timed_render(rig, takes, "a lighthouse", 300, args, e),
                    all_threads=True,
                )
                for way in (("eager", "compiled") if args.profile else ())
            }
            compile_stats = rig.stats().get("compile")
        finally:
            rig.close()
            sampler.close()
    rows: list[dict[str, Any]] = []
    header = f"{'render':14s} {'way':9s} {'whole s':>8s} {'encode s':>9s} {'steps s':>8s}"
    print(header + f" {'decode s':>9s}")
    for name, runs in (("prompt change", prompt_change), ("seed only", seed_only)):
        row: dict[str, Any] = {"render": name}
        for way in ("eager", "compiled"):
            m = row[way] = medians(runs[way])
            print(
                f"{name:14s} {way:9s} {m['wallS']:8.2f} {m['encodeS']:9.2f} {m['stepsS']:8.2f}"
                f" {m['decodeS']:9.2f}"
            )
        row["speedup"] = {
            key: round(row["eager"][key] / row["compiled"][key], 2)
            for key in ("wallS", "stepsS", "decodeS")
        }
        print(
            f"{'':14s} {'ratio':9s} {row['speedup']['wallS']:7.2f}x {'':9s}"
            f" {row['speedup']['stepsS']:7.2f}x {row['speedup']['decodeS']:8.2f}x"
        )
        rows.append(row)
    first_row = {
        "compiledWallS": round(first["wallS"], 1),
        "eagerWallS": round(first_eager["wallS"], 1),
    }
    print(
        f"first render: compiled {first_row['compiledWallS']} s (its compile),"
        f" eager {first_row['eagerWallS']} s (the set's load)"
    )
    print(f"max pixel diff eager vs compiled (same seed and prompt): {max(diffs)}")
    print(f"load {os.getloadavg()[0]:.1f} at the end")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    body = {
        "cpus": os.cpu_count(),
        "dtype": args.dtype,
        "px": args.px,
        "steps": args.steps,
        "renders": args.renders,
        "loadAverage": {"start": round(load, 2), "end": round(os.getloadavg()[0], 2)},
        "firstRender": first_row,
        "rows": rows,
        "maxPixelDiff": max(diffs),
        "compile": compile_stats,
        "profile": profiles,
    }
    for way, ops in profiles.items():
        print(f"{way}: " + ", ".join(f"{op['op']} {op['selfMs']:.0f} ms" for op in ops[:8]))
    OUT.write_text(json.dumps(body, indent=2) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
