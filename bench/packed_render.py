"""A whole Z-Image render with the denoiser's linear weights packed for oneDNN at load
(`diffusion/packed_linear.py`, the CPU policy's choice in bfloat16) against the same render
unpacked (a runtime with `no_compile`, as `--no-compile` sets it), side by side in one process,
through the Z-Image node's own runner on the real-size random set of `bench/real_size_cpu.py`.

    .venv/bin/python bench/packed_render.py [--models DIR] [--renders 3] [--px 64] [--steps 4]
        [--profile] [--roofline]

Two runtimes over the same files (the text encoder's and transformer's pages mapped once in the
page cache; the packed runtime holds a packed copy of the transformer's linear weights beside
them). After a warm-up render each, `--renders` pairs each way, alternating so both see the same
load: a prompt change (a new prompt: its encode, the steps, the decode) and a seed-only render
(the prompt's encode cached: the steps and the decode). The takes of one seed and prompt are
compared pixel by pixel. The compute threads wait at barriers as the server's would
(`server/openmp.choose_wait`: passively on oversubscribed CPUs). `--profile`: one seed-only
render each way under torch.profiler (top operators by self CPU time, every thread).
`--roofline`: the seed-only steps against this machine's floors for a step: reading the
denoiser's weights once, and computing its linear layers' flops at a large matmul's rate. Prints
medians, ratios and the load average; writes bench/results/packed_render.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT), str(ROOT / "bench")]
OUT = ROOT / "bench" / "results" / "packed_render.json"
WAYS = ("eager", "packed")


def print_head(keys: Sequence[str]) -> None:
    print(f"{'render':14s} {'way':7s} " + " ".join(f"{key:>9s}" for key in keys))


def table_row(
    name: str, runs: Mapping[str, list[dict[str, Any]]], keys: Sequence[str]
) -> dict[str, Any]:
    """One render kind's row, printed: each way's medians of `keys` (seconds), its walls, and
    eager's time over packed's, of each median and of each pair's wall."""
    row: dict[str, Any] = {"render": name}
    for way in WAYS:
        m = row[way] = {key: round(statistics.median(r[key] for r in runs[way]), 3) for key in keys}
        row[f"{way}WallsS"] = [round(r["wallS"], 2) for r in runs[way]]
        print(f"{name:14s} {way:7s} " + " ".join(f"{m[key]:9.2f}" for key in keys))
    # A phase a render skips (a seed-only render's cached encode) has no ratio.
    row["speedup"] = {
        key: round(row["eager"][key] / row["packed"][key], 2) if row["packed"][key] else None
        for key in keys
    }
    row["pairRatios"] = [
        round(e["wallS"] / p["wallS"], 2)
        for e, p in zip(runs["eager"], runs["packed"], strict=True)
    ]
    ratios = " ".join(
        f"{row['speedup'][key]:8.2f}x" if row["speedup"][key] else f"{'-':>9s}" for key in keys
    )
    print(f"{'':14s} {'ratio':7s} {ratios}   pairs {row['pairRatios']}")
    return row


def render_parser(description: str | None) -> argparse.ArgumentParser:
    """The options of a packed-against-unpacked render bench: the set, the pairs, the size."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--models", type=Path, default=Path(tempfile.gettempdir()) / "inline-real-size-set"
    )
    parser.add_argument("--renders", type=int, default=3)
    parser.add_argument("--px", type=int, default=64)
    parser.add_argument("--steps", type=int, default=4)
    return parser


def linear_flops(rig: Any, transformer: Any, takes: Path, args: Any) -> float:
    """The denoiser's linear layers' multiply-adds x 2 in one seed-only render's step, counted
    from the inputs they are called with (tokens x in x out a call)."""
    from compile_render import timed_render
    from torch import nn

    total = [0.0]

    def count(module: nn.Linear, inputs: tuple[Any, ...]) -> None:
        rows = inputs[0].numel() // module.in_features
        total[0] += 2.0 * rows * module.in_features * module.out_features

    linears = [m for m in transformer.modules() if isinstance(m, nn.Linear)]
    hooks = [m.register_forward_pre_hook(count) for m in linears]
    try:
        timed_render(rig, takes, "a lighthouse", 400, args, True)
    finally:
        for hook in hooks:
            hook.remove()
    return total[0] / args.steps


def roofline(
    weight_bytes: int, flops: float, seed_only: Mapping[str, list[dict[str, Any]]], steps: int
) -> dict[str, Any]:
    """How close a seed-only render's steps come to this machine's two floors for one forward a
    step (Z-Image unguided): reading the denoiser's weights once (the read rate of a bf16 sum
    over as many bytes) and computing its linear layers' flops (the rate of a large bf16 matmul,
    compute-bound), both in the compute threads."""
    import time

    import torch
    from torch.nn import functional

    def median_s(work: Any) -> float:
        work()
        times: list[float] = []
        for _ in range(7):
            start = time.perf_counter()
            work()
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    block = torch.ones(weight_bytes // 2, dtype=torch.bfloat16)
    read_s = median_s(block.sum)
    del block
    side = 4096
    weight = torch.randn(side, side, dtype=torch.bfloat16)
    rows = torch.randn(512, side, dtype=torch.bfloat16)
    peak = 2.0 * 512 * side * side / median_s(lambda: functional.linear(rows, weight))
    result: dict[str, Any] = {
        "weightGiB": round(weight_bytes / 1024**3, 3),
        "readGBs": round(weight_bytes / read_s / 1e9, 1),
        "readFloorMs": round(read_s * 1000, 1),
        "linearGflopsAStep": round(flops / 1e9, 1),
        "peakGflops": round(peak / 1e9, 1),
        "computeFloorMs": round(flops / peak * 1000, 1),
    }
    floor_s = max(read_s, flops / peak)
    for way in WAYS:
        step_s = statistics.median(r["stepsS"] for r in seed_only[way]) / steps
        result[way] = {"stepMs": round(step_s * 1000, 1), "overFloor": round(step_s / floor_s, 2)}
    return result


def main() -> int:
    parser = render_parser(__doc__)
    parser.add_argument("--profile", action="store_true", help="profile a seed-only render")
    parser.add_argument(
        "--roofline", action="store_true", help="the steps against the weights' read floor"
    )
    args = parser.parse_args()

    from inline_core.server.openmp import choose_wait

    choose_wait()  # before torch loads: the threads wait at barriers as the server's would
    from compile_render import timed_render
    from compile_zimage import top_ops
    from real_size_cpu import build_set

    from inline_core.config import Config
    from inline_core.diffusion.packed_linear import packed_bytes
    from inline_core.families.standalone import family_rig
    from inline_core.families.zimage import ZImageFamily
    from inline_core.sampling.loop import StepLoopSampler

    built = build_set(args.models)
    load = os.getloadavg()
    print(f"cpu bfloat16, {os.cpu_count()} CPUs, load {load}; set built {built or 'kept'}")
    sampler = StepLoopSampler()
    with tempfile.TemporaryDirectory(prefix="packed-render-") as data:
        rigs = {
            way: family_rig(
                ZImageFamily,
                args.models,
                sampler,
                config=Config(
                    models_dir=args.models,
                    data_dir=Path(data) / way,
                    profile="cpu",
                    dtype="bfloat16",
                    no_compile=way == "eager",
                ),
            )
            for way in WAYS
        }
        takes = Path(data) / "takes"
        try:
            chosen = {
                w: r.runtime.packed_linear_choice(r.family).to_json() for w, r in rigs.items()
            }
            assert chosen["packed"]["enabled"] and not chosen["eager"]["enabled"], chosen
            first = {
                w: timed_render(r, takes, "a lighthouse", 1, args, True) for w, r in rigs.items()
            }
            transformer = rigs["packed"].pipeline().denoiser.transformer
            packed_gib = packed_bytes(transformer) / 1024**3
            weight_bytes = sum(p.numel() * p.element_size() for p in transformer.parameters())
            prompt_change: dict[str, list[dict[str, Any]]] = {w: [] for w in WAYS}
            seed_only: dict[str, list[dict[str, Any]]] = {w: [] for w in WAYS}
            diffs: list[int] = []
            for i in range(args.renders):
                for way in WAYS:  # the same prompt and seed each way
                    prompt = f"a lighthouse on a cliff at dusk, study {i}"
                    prompt_change[way].append(
                        timed_render(rigs[way], takes, prompt, 100 + i, args, True)
                    )
                pair = {
                    w: timed_render(rigs[w], takes, "a lighthouse", 200 + i, args, True)
                    for w in WAYS
                }
                for way in WAYS:
                    seed_only[way].append(pair[way])
                diffs.append(int(abs(pair["eager"]["pixels"] - pair["packed"]["pixels"]).max()))
                changed = [prompt_change[w][-1]["pixels"] for w in WAYS]
                diffs.append(int(abs(changed[0] - changed[1]).max()))
            profiles = {
                way: top_ops(
                    lambda r=rigs[way]: timed_render(r, takes, "a lighthouse", 300, args, True),
                    all_threads=True,
                )
                for way in (WAYS if args.profile else ())
            }
            floor = None
            if args.roofline:
                flops = linear_flops(rigs["packed"], transformer, takes, args)
                floor = roofline(weight_bytes, flops, seed_only, args.steps)
        finally:
            for rig in rigs.values():
                rig.close()
            sampler.close()
    keys = ("wallS", "encodeS", "stepsS", "decodeS")
    print_head(keys)
    rows = [
        table_row(name, runs, keys)
        for name, runs in (("prompt change", prompt_change), ("seed only", seed_only))
    ]
    end = os.getloadavg()
    print(f"packed copy {packed_gib:.2f} GiB; max pixel diff eager vs packed: {max(diffs)}")
    print(f"load {load} at the start, {end} at the end")
    for way, ops in profiles.items():
        print(f"{way}: " + ", ".join(f"{op['op']} {op['selfMs']:.0f} ms" for op in ops[:8]))
    if floor is not None:
        print(
            f"a step reads {floor['weightGiB']} GiB of weights ({floor['readGBs']} GB/s: "
            f"{floor['readFloorMs']} ms) and computes {floor['linearGflopsAStep']} GFLOP in "
            f"linear layers ({floor['peakGflops']} GFLOP/s: {floor['computeFloorMs']} ms); "
            + ", ".join(f"{w} {floor[w]['stepMs']} ms ({floor[w]['overFloor']}x)" for w in WAYS)
        )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    body = {
        "command": " ".join(sys.argv),
        "cpus": os.cpu_count(),
        "px": args.px,
        "steps": args.steps,
        "renders": args.renders,
        "loadAverage": {"start": load, "end": end},
        "ompWaitPolicy": os.environ.get("OMP_WAIT_POLICY"),
        "gompSpinCount": os.environ.get("GOMP_SPINCOUNT"),
        "choices": chosen,
        "firstRenderS": {w: round(f["wallS"], 2) for w, f in first.items()},
        "packedGiB": round(packed_gib, 3),
        "rows": rows,
        "maxPixelDiff": max(diffs),
        "profile": profiles,
        "roofline": floor,
    }
    OUT.write_text(json.dumps(body, indent=2) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
