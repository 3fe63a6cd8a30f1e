"""Does one batched VAE decode beat the same decodes one by one? (sets `decode_pixel_budget`)

    .venv/bin/python bench/batching_decode.py [--cases 64x2,64x4,64x8,64x16,128x4,256x2]
                                              [--reps 5] [--threads 1]

The kit's VAE (the one every kit size uses), loaded the way the server loads it, decodes N random
latents of one size: N `FluxVAE.decode` calls against one `decode_many` call, alternating, median
of `--reps`. Also times one prompt encode (to judge whether batching encodes could pay). Prints a
table and writes bench/results/batching_decode.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "batching_decode.json"


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", default="64x2,64x4,64x8,64x16,128x2,128x4,128x8,256x2,256x4")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(cast(int, args.threads))
    from inline_core.components.interfaces import Latents
    from inline_core.families.standalone import family_rig
    from inline_core.families.zimage import ZImageFamily
    from inline_core.families.zimage.kit import build_kit
    from inline_core.sampling import StepLoopSampler

    models = Path(tempfile.mkdtemp(prefix="batching-decode-")) / "m"
    build_kit(models, "tiny", layouts=("comfy",))
    loader = StepLoopSampler(max_batch=1)
    pipeline = family_rig(ZImageFamily, models, loader).pipeline()
    vae = pipeline.vae
    reps = cast(int, args.reps)
    rows: list[dict[str, Any]] = []
    with torch.inference_mode():
        for case in cast(str, args.cases).split(","):
            px, n = (int(x) for x in case.split("x"))
            side = px // vae.spatial_factor
            latents = [
                Latents(value, tuple(value.shape))
                for value in (torch.randn(1, vae.latent_channels, side, side) for _ in range(n))
            ]
            vae.decode_many(latents)  # warm
            one: list[float] = []
            many: list[float] = []
            for _ in range(reps):
                one.append(timed(lambda batch=latents: [vae.decode(lat) for lat in batch]))
                many.append(timed(lambda batch=latents: vae.decode_many(batch)))
            row: dict[str, Any] = {
                "px": px,
                "n": n,
                "pixels": n * px * px,
                "oneByOneMs": round(statistics.median(one) * 1000, 1),
                "batchedMs": round(statistics.median(many) * 1000, 1),
            }
            row["speedup"] = round(row["oneByOneMs"] / row["batchedMs"], 3)
            rows.append(row)
            print(
                f"{px:4}px x{n:<3} ({row['pixels']:7} px) one by one {row['oneByOneMs']:7.1f} ms"
                f"  batched {row['batchedMs']:7.1f} ms  x{row['speedup']:.2f}",
                flush=True,
            )
        encoder = pipeline.text_encoder
        encoder.encode("warm up")
        encode_ms = statistics.median(
            timed(lambda: encoder.encode("a lighthouse on a cliff at dusk")) for _ in range(reps)
        )
    loader.close()
    print(f"one prompt encode: {encode_ms * 1000:.2f} ms")
    out = {
        "meta": {"threads": args.threads, "reps": reps, "loadAverage": os.getloadavg()},
        "promptEncodeMs": round(encode_ms * 1000, 2),
        "rows": rows,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
