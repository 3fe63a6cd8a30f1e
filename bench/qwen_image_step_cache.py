"""Step caching (DBCache, per request) on Qwen-Image at the sampler: what it skips and saves
alone, and whether it keeps paying under batching (`bench/step_cache.py`'s measurements, on
Qwen-Image's dual-stream blocks).

    .venv/bin/python bench/qwen_image_step_cache.py [--rounds 2] [--steps 20] [--threshold 0.5]
        [--front-blocks 1] [--lone-size 128] [--batch-size 64] [--concurrent 8]

The kit's mid-size random-weight Qwen-Image (8 dual-stream blocks, 6 heads of 128, ~120M),
diffusers layout, float32 on the CPU, guidance 4 (two rows per request: its prompt and its
negative), through the real `StepLoopSampler` and the resident pipeline, settings alternating
per round. Random weights move the front residual far more from step to step than a trained
model's, so the threshold is the bench's own (stated in the output with the warmup and the cap):
it measures what skipping costs and saves, not a trained model's cached quality. Prints a table
and writes bench/results/qwen_image_step_cache.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
from pathlib import Path
from typing import Any

from step_cache import Rig, measure, table  # the shared step cache measurements

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "qwen_image_step_cache.json"
MODEL = "qwen_image_mid_diffusers"
GUIDANCE = 4.0


class QwenImageRig(Rig):
    def __init__(self, models: Path) -> None:
        from inline_core.families.qwen_image import QwenImageFamily
        from inline_core.families.qwen_image.kit import build_kit

        build_kit(models, "mid", layouts=("diffusers",))
        super().__init__(QwenImageFamily, models, MODEL)

    @property
    def blocks(self) -> int:
        return 2 * len(self.pipeline.denoiser.transformer.transformer_blocks)  # two rows

    def state(self, seed: int, size: int, steps: int, cache: Any) -> Any:
        return self.pipeline.request(
            prompt=f"a paper lantern number {seed}",
            negative_prompt="blurry",
            width=size,
            height=size,
            steps=steps,
            guidance=GUIDANCE,
            seed=seed,
            step_cache=cache,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threshold", type=float, default=0.5)
    parser.add_argument("--warmup", type=int, default=8)
    parser.add_argument("--front-blocks", type=int, default=1)
    parser.add_argument("--lone-size", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--concurrent", type=int, default=8)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    from inline_core.runtime.step_cache import StepCacheSettings

    cache = StepCacheSettings(
        threshold=args.threshold, warmup=args.warmup, front_blocks=args.front_blocks
    )
    out: dict[str, Any] = {"machine": platform.platform(), "rounds": args.rounds}
    out["steps"] = args.steps
    with tempfile.TemporaryDirectory(prefix="inline-qwen-step-cache-bench-") as tmp:
        rig = QwenImageRig(Path(tmp) / "models")
        try:
            out["qwen-image"] = measure(rig, args, cache)
        finally:
            rig.close()
    table("Qwen-Image mid, guidance 4", args, out["qwen-image"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
