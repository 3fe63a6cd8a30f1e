"""What one batched Z-Image forward costs against separate ones: the evidence for the limits.

    .venv/bin/python bench/batching_forward.py [--sizes tiny,mid] [--device cpu] [--threads 1]

For each model size, dtype, image size and group size k, it times one transformer forward over k
requests (per-request lists, each with its own caption and timestep, as the sampler batches them)
against k single forwards. The gain is `k * t(1) / t(k)`: above 1 batching pays. The token budget
default is where the gain stops paying; `max_batch` where adding a request stops adding gain.
Writes bench/results/batching_forward_<device>.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import torch

from inline_core.families.zimage.kit import CAP_FEAT_DIM, build_transformer

RESULTS = Path(__file__).parent / "results"
CAPTION_TOKENS = 32


def _best(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(
    model: Any, dtype: torch.dtype, device: str, px: int, k: int, repeats: int
) -> dict[str, Any]:
    gen = torch.Generator("cpu").manual_seed(0)
    side = px // 8
    xs = [torch.randn(16, 1, side, side, generator=gen).to(device, dtype) for _ in range(k)]
    caps = [torch.randn(CAPTION_TOKENS, CAP_FEAT_DIM, generator=gen).to(device, dtype)] * k
    ts = torch.rand(k, generator=gen).to(device, dtype)
    sync: Callable[[], None] = torch.cuda.synchronize if device.startswith("cuda") else lambda: None

    def batched() -> None:
        with torch.inference_mode():
            model(xs, ts, caps, return_dict=False)
        sync()

    def separate() -> None:
        with torch.inference_mode():
            for i in range(k):
                model(xs[i : i + 1], ts[i : i + 1], caps[i : i + 1], return_dict=False)
        sync()

    # Interleaved, best of `repeats`: the machine is shared, and interference only adds time.
    batched()
    separate()
    t_batched = t_separate = float("inf")
    for _ in range(repeats):
        t_batched = min(t_batched, _best(batched))
        if k > 1:
            t_separate = min(t_separate, _best(separate))
    if k == 1:
        t_separate = t_batched
    tokens = (px // 16) ** 2
    return {
        "px": px,
        "k": k,
        "tokensPerImage": tokens,
        "groupTokens": tokens * k,
        "batchedMs": round(t_batched * 1000, 2),
        "separateMs": round(t_separate * 1000, 2),
        "gain": round(t_separate / t_batched, 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="tiny,mid")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--quick", action="store_true", help="fewer points (smoke run)")
    # One intra-op thread by default: on this shared 2-core machine a descheduled OpenMP worker
    # stalls every parallel region (measured: 8 tiny steps 1.5-5 s with 2 threads, 0.18 s with 1).
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(cast(int, args.threads))
    device = cast(str, args.device)
    quick = cast(bool, args.quick)
    plan: dict[str, list[tuple[torch.dtype, list[int], list[int]]]] = {
        "tiny": [(torch.float32, [64, 128, 256, 512], [1, 2, 4, 8, 16])],
        # A mid forward at 256 px takes seconds on a 2-core CPU: fewer points.
        "mid": [
            (torch.float32, [64, 128, 256], [1, 2, 4]),
            (torch.bfloat16, [64, 128], [1, 2, 4]),
        ],
    }
    rows: list[dict[str, Any]] = []
    for size in cast(str, args.sizes).split(","):
        base = build_transformer(size)
        for dtype, pxs, ks in plan[size]:
            model = base.to(device, dtype)
            for px in pxs[:2] if quick else pxs:
                for k in ks[:3] if quick else ks:
                    repeats = 9 if size == "tiny" else 5
                    row = {
                        "model": size,
                        "dtype": str(dtype).removeprefix("torch."),
                        "device": device,
                    }
                    row |= measure(model, dtype, device, px, k, repeats)
                    rows.append(row)
                    print(
                        f"{size:5} {row['dtype']:9} {px:4}px k={k:<3}"
                        f" tokens={row['groupTokens']:<6}"
                        f" batched={row['batchedMs']:>9.2f}ms separate={row['separateMs']:>9.2f}ms"
                        f" gain={row['gain']:.2f}x",
                        flush=True,
                    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"batching_forward_{device.split(':')[0]}.json"
    meta = {
        "machine": platform.processor() or platform.machine(),
        "torchThreads": torch.get_num_threads(),
        "torch": torch.__version__,
        "captionTokens": CAPTION_TOKENS,
    }
    out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
