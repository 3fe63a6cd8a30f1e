"""Tiny LTX-2 renders through the node runner and step loop vs bare diffusers' LTX2Pipeline.

Run by hand: `python bench/ltx2_tiny.py [--renders 6]`.

The kit's random-weight LTX-2 folder (`inline-core kit --family ltx2`), 32x32, 9 frames at 24 fps,
4 steps, guidance 4 (video) and 7 (sound): CFG on, CPU float32, both sides loaded from the same
folder, in one process. Sides:
- pipeline: `LTX2Pipeline(...)` per render (its further guidance terms off, as the node runs
  without them), frames and sound as numpy (no file written);
- node: `lightricks/ltx-2` through `FamilyNodeRunner` and the step loop, format png (a lossless
  APNG take) and a WAV audio take, written to a temporary folder.
Renders alternate between the sides seed by seed, so both see the same machine load; the medians
are compared as a ratio; the first render of each side (it loads) is left out. Prints a table and
writes bench/results/ltx2_tiny.json.
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
    args = parser.parse_args()

    import torch
    from diffusers import LTX2Pipeline  # pyright: ignore[reportPrivateImportUsage]

    from inline_core.families.ltx2.kit import write_kit
    from inline_core.sampling.loop import StepLoopSampler
    from tests.families.ltx2.ltx2_harness import ltx2_rig, reference, render

    work = Path(tempfile.mkdtemp(prefix="ltx2-bench-"))
    kit = write_kit(work / "models")
    pipe: Any = LTX2Pipeline.from_pretrained(  # pyright: ignore[reportUnknownMemberType]
        str(kit.diffusers_dir), dtype=torch.float32, local_files_only=True
    )
    pipe.set_progress_bar_config(disable=True)
    sampler = StepLoopSampler()
    rig = ltx2_rig(kit.root, sampler)
    times: dict[str, list[float]] = {"pipeline": [], "node": []}
    try:
        for seed in range(args.renders + 1):
            t0 = time.perf_counter()
            reference(pipe, seed=seed, **RENDER)
            pipeline_ms = (time.perf_counter() - t0) * 1000
            t0 = time.perf_counter()
            render(rig, work / "takes", seed=seed, **RENDER)
            node_ms = (time.perf_counter() - t0) * 1000
            if seed:  # the first render of each side loads
                times["pipeline"].append(pipeline_ms)
                times["node"].append(node_ms)
    finally:
        sampler.close()
    medians = {side: statistics.median(values) for side, values in times.items()}
    ratio = medians["node"] / medians["pipeline"]
    result = {
        "render": RENDER,
        "renders": args.renders,
        "median_ms": medians,
        "ratio_node_over_pipeline": ratio,
        "load": os.getloadavg(),
        "machine": platform.platform(),
    }
    print(f"{'side':10} {'median ms':>10}")
    for side, value in medians.items():
        print(f"{side:10} {value:10.0f}")
    print(f"node / pipeline: {ratio:.3f} (load {os.getloadavg()[0]:.1f})")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
