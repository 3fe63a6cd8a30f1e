"""How fast a take's PNG encodes: Pillow's default, Pillow with the options takes were written with
until now, and the takes' own encoder (`runtime/png.py`: numpy Paeth rows, bands deflated on
threads, zlib-ng where installed).

    .venv/bin/python bench/png_encode.py [--size 1024] [--repeats 5]

Four synthetic pictures of the size (pure noise, what random-weight models draw; soft clouds;
clouds with film grain; fine detail), each encoded the three ways side by side in one run. Prints
the best-of-N wall time, the CPU time of that encode (all threads) and the file size of each, the
ratios against Pillow with the old options, and the load average; writes
bench/results/png_encode.json. Every new file is decoded and checked to hold the same pixels.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageFilter

from inline_core.runtime.png import PNG_OPTIONS, deflater, encode_png

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


def pillow(options: dict[str, Any]) -> Callable[[Image.Image], bytes]:
    def save(image: Image.Image) -> bytes:
        buf = io.BytesIO()
        image.save(buf, format="PNG", **options)
        return buf.getvalue()

    return save


def timed(
    write: Callable[[Image.Image], bytes], image: Image.Image, repeats: int
) -> tuple[float, float, bytes]:
    """Best-of-`repeats` wall and CPU milliseconds (of the best run) and the bytes."""
    best, cpu, data = float("inf"), 0.0, b""
    for _ in range(repeats):
        wall0, cpu0 = time.perf_counter(), time.process_time()
        data = write(image)
        wall = (time.perf_counter() - wall0) * 1000
        if wall < best:
            best, cpu = wall, (time.process_time() - cpu0) * 1000
    return best, cpu, data


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    ways: dict[str, Callable[[Image.Image], bytes]] = {
        "default": pillow({}),
        "old": pillow(PNG_OPTIONS),
        "takes": lambda image: encode_png(image, {}),
    }
    rows: list[dict[str, Any]] = []
    load = os.getloadavg()
    print(f"deflater {deflater()[0]}, {os.cpu_count()} CPUs, load {load[0]:.1f}")
    print(
        f"{'picture':13s} {'default ms':>10s} {'old ms':>8s} {'takes ms':>9s} {'old cpu':>8s}"
        f" {'takes cpu':>9s} {'vs old':>7s} {'cpu vs old':>10s} {'size vs old':>11s}"
    )
    for name, image in pictures(args.size).items():
        got = {way: timed(write, image, args.repeats) for way, write in ways.items()}
        decoded = np.asarray(Image.open(io.BytesIO(got["takes"][2])))
        if not np.array_equal(decoded, np.asarray(image)):
            raise SystemExit(f"{name}: the takes' encoder changed the pixels")
        row: dict[str, Any] = {"picture": name, "size": args.size}
        for way, (wall, cpu, data) in got.items():
            row[f"{way}Ms"] = round(wall, 1)
            row[f"{way}CpuMs"] = round(cpu, 1)
            row[f"{way}Bytes"] = len(data)
        row["speedup"] = round(got["old"][0] / got["takes"][0], 2)
        row["cpuSpeedup"] = round(got["old"][1] / max(got["takes"][1], 1e-3), 2)
        row["sizeRatio"] = round(len(got["takes"][2]) / len(got["old"][2]), 3)
        rows.append(row)
        print(
            f"{name:13s} {row['defaultMs']:10.1f} {row['oldMs']:8.1f} {row['takesMs']:9.1f}"
            f" {row['oldCpuMs']:8.1f} {row['takesCpuMs']:9.1f} {row['speedup']:6.2f}x"
            f" {row['cpuSpeedup']:9.2f}x {row['sizeRatio']:11.3f}"
        )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    summary = {
        "deflater": deflater()[0],
        "cpus": os.cpu_count(),
        "loadAverage": [round(v, 2) for v in load],
        "oldOptions": str(PNG_OPTIONS),
        "rows": rows,
    }
    OUT.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
