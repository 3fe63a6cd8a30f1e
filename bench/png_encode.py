"""How fast a take's PNG encodes: Pillow's default against the options takes are written with.

    .venv/bin/python bench/png_encode.py [--size 1024] [--repeats 5]

Four synthetic pictures of the size (pure noise, what random-weight models draw; soft clouds;
clouds with film grain; fine detail), each encoded with Pillow's default (zlib level 6) and with
`runtime.context.PNG_OPTIONS`, side by side in one run. Prints the best-of-N time and the file size
of each, and the ratios; writes bench/results/png_encode.json.
"""

from __future__ import annotations

import argparse
import io
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageFilter

from inline_core.runtime.context import PNG_OPTIONS

OUT = Path(__file__).parent / "results" / "png_encode.json"


def pictures(size: int) -> dict[str, Image.Image]:
    rng = np.random.default_rng(1)
    clouds = Image.fromarray(rng.integers(0, 256, (size // 16, size // 16, 3), dtype=np.uint8))
    clouds = clouds.resize((size, size), Image.Resampling.BICUBIC)
    grain = rng.integers(-6, 7, (size, size, 3))
    grainy = np.clip(np.asarray(clouds).astype(np.int64) + grain, 0, 255).astype(np.uint8)
    detail = Image.fromarray(rng.integers(0, 256, (size // 4, size // 4, 3), dtype=np.uint8))
    return {
        "noise": Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)),
        "clouds": clouds,
        "clouds+grain": Image.fromarray(grainy),
        "detail": detail.resize((size, size), Image.Resampling.BILINEAR).filter(ImageFilter.DETAIL),
    }


def encode(image: Image.Image, options: dict[str, Any], repeats: int) -> tuple[float, int]:
    """Best-of-`repeats` milliseconds and the byte size of one PNG encode."""
    best, size = float("inf"), 0
    for _ in range(repeats):
        buf = io.BytesIO()
        began = time.perf_counter()
        image.save(buf, format="PNG", **options)
        best = min(best, (time.perf_counter() - began) * 1000)
        size = len(buf.getvalue())
    return best, size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    header = ("picture", "default ms", "takes ms", "speed-up", "size ratio")
    print(f"{header[0]:13s} {header[1]:>10s} {header[2]:>9s} {header[3]:>8s} {header[4]:>10s}")
    for name, image in pictures(args.size).items():
        default_ms, default_bytes = encode(image, {}, args.repeats)
        takes_ms, takes_bytes = encode(image, PNG_OPTIONS, args.repeats)
        row = {
            "picture": name,
            "size": args.size,
            "defaultMs": round(default_ms, 1),
            "defaultBytes": default_bytes,
            "takesMs": round(takes_ms, 1),
            "takesBytes": takes_bytes,
            "speedup": round(default_ms / takes_ms, 2),
            "sizeRatio": round(takes_bytes / default_bytes, 3),
        }
        rows.append(row)
        print(
            f"{name:13s} {default_ms:10.1f} {takes_ms:9.1f} {row['speedup']:7.2f}x "
            f"{row['sizeRatio']:10.3f}"
        )
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps({"options": str(PNG_OPTIONS), "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
