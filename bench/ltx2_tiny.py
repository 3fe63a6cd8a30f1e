"""LTX-2 renders through the node runner and step loop vs bare diffusers' LTX2Pipeline.

Run by hand: `python bench/ltx2_tiny.py [--renders 6] [--sizes tiny,mid]`.

The kit's random-weight LTX-2 folders (`inline-core kit --family ltx2 --size tiny|mid`: mid is a
~43M-parameter transformer), 32x32 (the kit's VAE is 2x down: 1280 video tokens a row), 9 frames
at 24 fps, 4 steps, guidance 4 (video) and 7 (sound): CFG on, CPU float32, both sides loaded from
the same folder, in one process. Sides:
- pipeline: `LTX2Pipeline(...)` per render (its further guidance terms off, as the node runs
  without them), frames and sound as numpy (no file written);
- node: `lightricks/ltx-2` through `FamilyNodeRunner` and the step loop, format png (a lossless
  APNG take) and a WAV audio take, written to a temporary folder.
Renders alternate between the sides seed by seed, so both see the same machine load; the medians
are compared as a ratio, size by size; the first render of each side (it loads) is left out.
Prints a table and writes bench/results/ltx2_tiny.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tests' harness: the same renders the parity tests make
RESULTS = ROOT / "bench" / "results" / "ltx2_tiny.json"
SIZES = ("tiny", "mid")
RENDER: dict[str, Any] = {
    "width": 32,
    "height": 32,
    "frames": 9,
    "fps": 24,
    "steps": 4,
    "guidance": 4.0,
    "audio_guidance": 7.0,
}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--renders", type=int, default=6)
    parser.add_argument("--sizes", default="tiny")
    args = parser.parse_args()
    sizes = [size for size in args.sizes.split(",") if size]
    unknown = [size for size in sizes if size not in SIZES]
    if unknown:
        parser.error(f"no size {unknown[0]!r}: {', '.join(SIZES)}")
    result: dict[str, Any] = {"renders": args.renders, "machine": platform.platform()}
    print(f"{'size':6} {'pipeline ms':>12} {'node ms':>10} {'node/pipeline':>14} {'load':>6}")
    for size in sizes:
        medians = measure(size, args.renders)
        ratio = medians["node"] / medians["pipeline"]
        load = os.getloadavg()[0]
        result[size] = {
            "render": RENDER,
            "median_ms": medians,
            "ratio_node_over_pipeline": ratio,
            "load": load,
        }
        print(
            f"{size:6} {medians['pipeline']:12.0f} {medians['node']:10.0f} {ratio:14.3f} "
            f"{load:6.1f}"
        )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2))
    return 0


def measure(size: str, renders: int) -> dict[str, float]:
    """Each side's median render time (ms) at this size, renders alternating seed by seed."""
    import torch
    from diffusers import LTX2Pipeline  # pyright: ignore[reportPrivateImportUsage]

    from inline_core.families.ltx2.kit import folder_name, write_kit
    from inline_core.sampling.loop import StepLoopSampler
    from tests.families.ltx2.ltx2_harness import ltx2_rig, reference, render

    work = Path(tempfile.mkdtemp(prefix=f"ltx2-bench-{size}-"))
    kit = write_kit(work / "models", size)
    pipe: Any = LTX2Pipeline.from_pretrained(  # pyright: ignore[reportUnknownMemberType]
        str(kit.diffusers_dir), dtype=torch.float32, local_files_only=True
    )
    pipe.set_progress_bar_config(disable=True)
    sampler = StepLoopSampler()
    rig = ltx2_rig(kit.root, sampler)
    spec: dict[str, Any] = {**RENDER, "model": folder_name(size)}
    times: dict[str, list[float]] = {"pipeline": [], "node": []}
    try:
        for seed in range(renders + 1):
            t0 = time.perf_counter()
            reference(pipe, seed=seed, **spec)
            pipeline_ms = (time.perf_counter() - t0) * 1000
            t0 = time.perf_counter()
            render(rig, work / "takes", seed=seed, **spec)
            node_ms = (time.perf_counter() - t0) * 1000
            if seed:  # the first render of each side loads
                times["pipeline"].append(pipeline_ms)
                times["node"].append(node_ms)
    finally:
        sampler.close()
    return {side: statistics.median(values) for side, values in times.items()}


if __name__ == "__main__":
    sys.exit(main())
