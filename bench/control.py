"""Control renders at the sampler: what the control branch costs, and what batching it saves.

    .venv/bin/python bench/control.py [--rounds 3] [--steps 4] [--size tiny|mid] [--px 128]

On the kit's random-weight Z-Image models (a temporary folder), through the real
`StepLoopSampler` and the resident pipeline, side by side in one run, settings alternating per
round so drift on a shared machine hits every setting alike:

1. A control render against a plain one, alone and at 8 concurrent (8 different control images
   and strengths): wall time per wave and the ratio control / plain. The control model has the
   1.0 union's density (a control block every 5th transformer layer, 2 plain refiner blocks).
2. 8 concurrent control requests batched (the control branch runs once per forward, its hints
   scaled per row) against the same 8 unbatched (each request its own batch key, as a server
   without per-row control would have to run them).

Prints a table, writes bench/results/control.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lora import Rig as LoraRig
from lora import alternate

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "control.json"
CONCURRENT = 8
CONTROL_FILE = "bench_union.safetensors"


def alone_request_class() -> type[Any]:
    from inline_core.families.zimage.request import ZImageRequest

    @dataclass(eq=False)
    class Unbatched(ZImageRequest):
        """A request that shares no forward: its own batch key."""

        @property
        def batch_key(self) -> Hashable:
            return (super().batch_key, id(self))

    return Unbatched


def write_control(root: Path, size: str) -> None:
    """A control model over the kit's transformer with the 1.0 union's density."""
    import torch

    from inline_core.diffusion.kit import save_weights, seeded
    from inline_core.diffusion.libs import diffusers
    from inline_core.families.zimage.kit import build_transformer
    from inline_core.families.zimage.kit_control import control_config

    transformer = build_transformer(size)
    config = control_config(transformer, "union")
    layers = len(config["control_layers_places"])
    config["control_layers_places"] = list(range(0, layers, 5)) or [0]
    seeded(9)
    model: Any = diffusers().ZImageControlNetModel(**config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "_proj" in name:
                p.normal_(0.0, 0.02)
    save_weights(model.state_dict(), root / "controlnet" / CONTROL_FILE, torch.float32)


class Rig(LoraRig):
    """The LoRA bench's rig (a sampler and the resident pipeline), with control requests."""

    def __init__(self, models: Path, model: str) -> None:
        from inline_core.families.zimage.control_files import control_entry, control_use

        super().__init__(models, model)
        self.unbatched = alone_request_class()
        self.entry = control_entry(self.rig.catalog, CONTROL_FILE, None)
        self.control_use = control_use

    def control_job(self, seed: int, px: int, steps: int, control: bool, batched: bool) -> Any:
        from PIL import Image, ImageDraw

        from inline_core.sampling.job import SampleJob

        fields: dict[str, Any] = {
            "prompt": f"a render {seed}",
            "width": px,
            "height": px,
            "steps": steps,
            "guidance": 0.0,
            "seed": seed,
        }
        if control:
            image = Image.new("RGB", (px, px), "black")
            ImageDraw.Draw(image).line((seed, 0, px - 1, px - 1 - seed), fill="white", width=2)
            use = self.control_use(self.entry, 0.5 + seed / 16)
            fields |= {"control": use, "control_image": image}
        state = self.pipeline.request(**fields)
        if not batched:
            state = self.unbatched(**fields, model_key=state.model_key)
        return SampleJob(self.pipeline, state)


def measure(root: Path, size: str, px: int, steps: int, rounds: int) -> dict[str, Any]:
    from inline_core.families.zimage.kit import build_kit

    build_kit(root, size, layouts=("diffusers",), dtype="float32")
    write_control(root, size)
    rig = Rig(root, f"zimage_{size}_diffusers")
    try:

        def wave(count: int, control: bool, batched: bool = True) -> Callable[[], float]:
            return lambda: rig.wave(
                [rig.control_job(i, px, steps, control, batched) for i in range(count)]
            )

        wave(CONCURRENT, True)()  # warm: the control model loads, caches fill
        before = rig.sampler.stats()
        times = alternate(
            {
                "1 plain": wave(1, False),
                "1 control": wave(1, True),
                "8 plain": wave(CONCURRENT, False),
                "8 control, batched": wave(CONCURRENT, True),
                "8 control, unbatched": wave(CONCURRENT, True, batched=False),
            },
            rounds,
        )
        after = rig.sampler.stats()
    finally:
        rig.close()
    med = {name: statistics.median(t) for name, t in times.items()}
    return {
        "waveSeconds": med,
        "samples": times,
        "controlOverPlain1": med["1 control"] / med["1 plain"],
        "controlOverPlain8": med["8 control, batched"] / med["8 plain"],
        "unbatchedOverBatched8": med["8 control, unbatched"] / med["8 control, batched"],
        "forwards": after["forwards"] - before["forwards"],
        "batchedForwards": after["batchedForwards"] - before["batchedForwards"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--size", choices=("tiny", "mid"), default="mid")
    parser.add_argument("--px", type=int, default=128)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="inline-control-bench-") as tmp:
        result = measure(Path(tmp) / "models", args.size, args.px, args.steps, args.rounds)
    load_after = os.getloadavg()
    rows = [(f"wave: {name}", f"{s:.3f} s") for name, s in result["waveSeconds"].items()]
    rows += [
        ("control / plain, alone", f"{result['controlOverPlain1']:.2f}x"),
        ("control / plain, 8 concurrent", f"{result['controlOverPlain8']:.2f}x"),
        ("8 control: unbatched / batched", f"{result['unbatchedOverBatched8']:.2f}x"),
        ("forwards (batched)", f"{result['forwards']} ({result['batchedForwards']})"),
        ("load average before / after", f"{load_before[0]:.2f} / {load_after[0]:.2f}"),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    out: dict[str, Any] = {
        "machine": platform.platform(),
        "size": args.size,
        "px": args.px,
        "steps": args.steps,
        "rounds": args.rounds,
        "loadAverage": {"before": load_before, "after": load_after},
        **result,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
