"""Step caching (DBCache, per request) at the sampler: what it skips, what it saves, and whether
it keeps working under batching, on Z-Image and on Wan.

    .venv/bin/python bench/step_cache.py [--family zimage|wan|both] [--rounds 3] [--steps 28]
        [--threshold 0.9] [--lone-size 256] [--batch-size 128] [--concurrent 8]
        [--wan-threshold 0.5] [--wan-frames 9] [--wan-batch-frames 5]
        [--wan-lone-size 128] [--wan-batch-size 64]

Z-Image: the kit's mid-size random-weight model (dim 768, 10 main blocks, ~110M). Wan: a
mid-size random Wan 2.1 transformer made here (dim 256, 12 blocks, ~14M, in ComfyUI's layout
beside the tiny kit's UMT5 and VAE), guidance 5 (two rows per request). Both are written to a
temporary folder and run through the real `StepLoopSampler` and the resident pipeline, side by
side in one run, settings alternating per round so drift on a shared machine hits each alike:

1. A lone render at `--steps` steps, caching off against on: wall time, the sampler's forward
   time, and the blocks the cache skipped (of rows x steps x blocks).
2. `--concurrent` renders at once, all cached, batching on (this server) against batching off
   (one request per forward: what a per-transformer cache such as cache-dit's forces, and what
   vLLM-Omni and SGLang do by turning caching off or refusing it under step batching); and
   batching on with caching off, for scale. Wan's renders share one shape (its forwards take
   one batched tensor).

The random weights move the front residual far more from step to step than a trained model's
(Z-Image: relative L1 0.74-1.08 at 128 px over 28 steps, measured here; cache-dit's default
threshold 0.08 reuses nothing), so each family's threshold is the bench's own (the cap on
consecutive reuses then does much of the deciding), stated in the output with the warmup (8
steps), the front blocks (cache-dit's F8B0 would leave 2 of 10 blocks on Z-Image, so F4B0) and
the cap. What it measures is what skipping costs and saves, not the quality of a trained
model's cached render.

Prints a table per family, writes bench/results/step_cache.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lora import alternate  # one way to alternate settings per round for every bench

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "step_cache.json"
ZIMAGE_MODEL = "zimage_mid_diffusers"
WAN_MODEL = "wan2.1_t2v_mid_fp32.safetensors"
# Two 128-wide heads (Wan's own head width), 12 blocks, a 4x feed-forward.
WAN_MID: dict[str, Any] = {"num_attention_heads": 2, "attention_head_dim": 128}
WAN_MID.update(ffn_dim=1024, num_layers=12)


class Rig(ABC):
    """A family's pipeline over two samplers: batching on, and one request per forward."""

    part = "lone"  # the bench's part under way ("lone", "concurrent")

    def __init__(self, family: Any, models: Path, model: str) -> None:
        from inline_core.config import Config
        from inline_core.families.standalone import family_rig
        from inline_core.sampling.loop import StepLoopSampler

        self.batched = StepLoopSampler()
        self.alone = StepLoopSampler(max_batch=1)
        config = Config(models_dir=models, profile="cpu", dtype="float32")
        self.rig = family_rig(family, models, self.batched, config=config)
        self.pipeline: Any = self.rig.pipeline(model)

    @property
    @abstractmethod
    def blocks(self) -> int:
        """Block calls per step of one request (every row's)."""

    @abstractmethod
    def state(self, seed: int, size: int, steps: int, cache: Any) -> Any:
        """A new request state of this family at `size` px and `steps` steps."""

    def wave(self, sampler: Any, states: list[Any]) -> float:
        from inline_core.sampling.job import SampleJob

        start = time.perf_counter()
        futures = [sampler.submit(SampleJob(self.pipeline, s)) for s in states]
        for f in futures:
            f.result(timeout=1800)
        return time.perf_counter() - start

    def close(self) -> None:
        self.batched.close()
        self.alone.close()


class ZImageRig(Rig):
    def __init__(self, models: Path) -> None:
        from inline_core.families.zimage import ZImageFamily
        from inline_core.families.zimage.kit import build_kit

        build_kit(models, "mid", layouts=("diffusers",), dtype="float32")
        super().__init__(ZImageFamily, models, ZIMAGE_MODEL)

    @property
    def blocks(self) -> int:
        return len(self.pipeline.denoiser.transformer.layers)

    def state(self, seed: int, size: int, steps: int, cache: Any) -> Any:
        return self.pipeline.request(
            prompt=f"a render {seed}",
            width=size,
            height=size,
            steps=steps,
            guidance=0.0,
            seed=seed,
            step_cache=cache,
        )


class WanRig(Rig):
    GUIDANCE = 5.0  # two rows per request: its prompt and its negative

    def __init__(self, models: Path, frames: int, batch_frames: int) -> None:
        from inline_core.families.wan import WanFamily

        write_wan_mid(models)
        super().__init__(WanFamily, models, WAN_MODEL)
        self.frames = {"lone": frames, "concurrent": batch_frames}

    @property
    def blocks(self) -> int:
        return 2 * len(self.pipeline.transformer.blocks)

    def state(self, seed: int, size: int, steps: int, cache: Any) -> Any:
        return self.pipeline.request(
            prompt=f"a render {seed}",
            width=size,
            height=size,
            frames=self.frames[self.part],
            steps=steps,
            guidance=self.GUIDANCE,
            seed=seed,
            format="png",
            step_cache=cache,
        )


def write_wan_mid(models: Path) -> None:
    """The tiny Wan kit (its UMT5 and VAE), and a mid-size random transformer beside its own."""
    import torch

    from inline_core.diffusion.kit import save_weights, seeded
    from inline_core.diffusion.libs import diffusers
    from inline_core.families.wan import transformer
    from inline_core.families.wan.kit import TRANSFORMER_CONFIG, build_kit

    build_kit(models, layouts=("comfy",), variants=("t2v",))
    seeded(31)
    config = {**TRANSFORMER_CONFIG, **WAN_MID}
    model = diffusers().WanTransformer3DModel(**config).eval()
    path = models / "diffusion_models" / WAN_MODEL
    save_weights(transformer.to_original(model.state_dict()), path, torch.float32)


def skipped(states: list[Any]) -> dict[str, int]:
    totals = {"computedSteps": 0, "reusedSteps": 0, "skippedBlocks": 0, "computedBlocks": 0}
    for s in states:
        for key, value in s.cache.stats().items():
            totals[key] += value
    return totals


def lone(rig: Rig, rounds: int, steps: int, size: int, cache: Any) -> dict[str, Any]:
    last: dict[str, Any] = {}
    forward: dict[str, list[float]] = {"off": [], "on": []}

    def run(name: str, settings: Any) -> Callable[[], float]:
        def once() -> float:
            state = rig.state(1, size, steps, settings)
            before = rig.batched.stats()["forwardSeconds"]
            seconds = rig.wave(rig.batched, [state])
            forward[name].append(rig.batched.stats()["forwardSeconds"] - before)
            last[name] = state
            return seconds

        return once

    rig.wave(rig.batched, [rig.state(1, size, 2, None)])  # warm
    times = alternate({"off": run("off", None), "on": run("on", cache)}, rounds)
    wall = {name: statistics.median(t) for name, t in times.items()}
    fwd = {name: statistics.median(t) for name, t in forward.items()}
    stats = skipped([last["on"]])
    return {
        "wallSeconds": wall,
        "forwardSeconds": fwd,
        "samples": times,
        "stats": stats,
        "blocks": steps * rig.blocks,
        "wallOffOverOn": wall["off"] / wall["on"],
        "forwardOffOverOn": fwd["off"] / fwd["on"],
    }


def concurrent(
    rig: Rig, rounds: int, steps: int, size: int, count: int, cache: Any
) -> dict[str, Any]:
    last: dict[str, list[Any]] = {}

    def run(name: str, sampler: Any, settings: Any) -> Callable[[], float]:
        def once() -> float:
            states = [rig.state(i, size, steps, settings) for i in range(count)]
            last[name] = states
            return rig.wave(sampler, states)

        return once

    rig.wave(rig.batched, [rig.state(i, size, 2, cache) for i in range(count)])  # warm
    before = rig.batched.stats()
    times = alternate(
        {
            "cached, batched": run("cached, batched", rig.batched, cache),
            "cached, one per forward": run("cached, one per forward", rig.alone, cache),
            "uncached, batched": run("uncached, batched", rig.batched, None),
        },
        rounds,
    )
    after = rig.batched.stats()
    rates = {name: count / statistics.median(t) for name, t in times.items()}
    return {
        "imagesPerSecond": rates,
        "samples": times,
        "stats": {
            name: skipped(states) for name, states in last.items() if states[0].cache is not None
        },
        "batchedOverOnePerForward": rates["cached, batched"] / rates["cached, one per forward"],
        "cachedOverUncached": rates["cached, batched"] / rates["uncached, batched"],
        "batchedForwards": after["batchedForwards"] - before["batchedForwards"],
    }


def measure(rig: Rig, args: argparse.Namespace, cache: Any) -> dict[str, Any]:
    load_before = os.getloadavg()
    alone = lone(rig, args.rounds, args.steps, args.lone_size, cache)
    rig.part = "concurrent"
    many = concurrent(rig, args.rounds, args.steps, args.batch_size, args.concurrent, cache)
    load_after = os.getloadavg()
    return {
        "load": {"before": load_before, "after": load_after},
        "settings": cache.to_json(),
        "lone": alone,
        "concurrent": many,
    }


def table(name: str, args: argparse.Namespace, result: dict[str, Any]) -> None:
    alone, many, s = result["lone"], result["concurrent"], result["lone"]["stats"]
    load = result["load"]
    rows = [
        ("settings", json.dumps(result["settings"])),
        ("load (1 min) before / after", f"{load['before'][0]:.2f} / {load['after'][0]:.2f}"),
        (
            f"lone {args.lone_size} px, {args.steps} steps, off",
            f"{alone['wallSeconds']['off']:.2f} s",
        ),
        (
            f"lone {args.lone_size} px, {args.steps} steps, on",
            f"{alone['wallSeconds']['on']:.2f} s",
        ),
        ("  reused steps / computed", f"{s['reusedSteps']} / {s['computedSteps']}"),
        ("  skipped blocks", f"{s['skippedBlocks']} of {alone['blocks']}"),
        ("  off / on, wall", f"{alone['wallOffOverOn']:.2f}x"),
        ("  off / on, forward time", f"{alone['forwardOffOverOn']:.2f}x"),
    ]
    for setting, rate in many["imagesPerSecond"].items():
        rows.append((f"{args.concurrent} x {args.batch_size} px, {setting}", f"{rate:.3f} /s"))
    rows.append(("cached: batched / one per forward", f"{many['batchedOverOnePerForward']:.2f}x"))
    rows.append(("batched: cached / uncached", f"{many['cachedOverUncached']:.2f}x"))
    rows.append(("  batched forwards", str(many["batchedForwards"])))
    for setting, st in many["stats"].items():
        rows.append(
            (
                f"  {setting}: reused steps, skipped blocks",
                f"{st['reusedSteps']}, {st['skippedBlocks']}",
            )
        )
    print(f"== {name}")
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"{label:<{width}}  {value}")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--family", choices=("zimage", "wan", "both"), default="both")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=28)
    parser.add_argument("--threshold", type=float, default=0.9)
    parser.add_argument("--front-blocks", type=int, default=4)
    parser.add_argument("--lone-size", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--concurrent", type=int, default=8)
    parser.add_argument("--wan-threshold", type=float, default=0.5)
    parser.add_argument("--wan-frames", type=int, default=9)
    # Five frames (two latent frames) at 64 px: 64 tokens a request with its negative, so four
    # share a forward within the CPU's 256-token budget.
    parser.add_argument("--wan-batch-frames", type=int, default=5)
    parser.add_argument("--wan-lone-size", type=int, default=128)
    parser.add_argument("--wan-batch-size", type=int, default=64)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    from inline_core.runtime.step_cache import StepCacheSettings

    out: dict[str, Any] = {"machine": platform.platform(), "rounds": args.rounds}
    out["steps"] = args.steps
    with tempfile.TemporaryDirectory(prefix="inline-step-cache-bench-") as tmp:
        if args.family in ("zimage", "both"):
            cache = StepCacheSettings(threshold=args.threshold, front_blocks=args.front_blocks)
            rig: Rig = ZImageRig(Path(tmp) / "zimage")
            try:
                out["zimage"] = measure(rig, args, cache)
            finally:
                rig.close()
            table("Z-Image mid", args, out["zimage"])
        if args.family in ("wan", "both"):
            cache = StepCacheSettings(threshold=args.wan_threshold, front_blocks=args.front_blocks)
            wan_args = argparse.Namespace(**vars(args))
            wan_args.lone_size, wan_args.batch_size = args.wan_lone_size, args.wan_batch_size
            rig = WanRig(Path(tmp) / "wan", args.wan_frames, args.wan_batch_frames)
            try:
                out["wan"] = measure(rig, wan_args, cache)
            finally:
                rig.close()
            out["wan"]["frames"] = {"lone": args.wan_frames, "concurrent": args.wan_batch_frames}
            title = f"Wan mid, guidance 5, {args.wan_frames} frames alone"
            table(f"{title}, {args.wan_batch_frames} concurrently", wan_args, out["wan"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
