"""SDXL through the server vs the same render by a bare diffusers `StableDiffusionXLPipeline`, and
the server's batching on and off at 8 concurrent renders of one size.

Run by hand: `python bench/sdxl_server_vs_pipeline.py [--renders 5] [--sizes tiny,mid]
[--concurrent 8]`.

The kit's random-weight models (tiny: 64x64; mid: a ~100M-parameter UNet at 256x256), Euler on
SDXL's leading timesteps (`euler` on `ddim_uniform` server-side, `EulerDiscreteScheduler` in
diffusers: the same sigmas), guidance 5, CPU float32, both sides loading the same diffusers
folder. The server is `python -m inline_core.server` in its own process (`server_process.py`); a
render is `POST /v1/runs` (input/text -> stability/sdxl) until the run's websocket says
`run_done` (the PNG take written, fsynced and committed). Renders alternate between the sides
seed by seed so both see the same machine load (this machine is shared); the medians of the
paired renders are compared, the first render of each side (it loads) left out. Then
`--concurrent` renders of one size are submitted at once to a server with batching on (the
default) and off (`INLINE_MAX_BATCH=1`), wall time to the last `run_done`. Prints a table and
writes bench/results/sdxl.json.

`--loras` repeats the concurrent runs with each render cycling through no LoRA and the kit's two
kohya LoRAs (UNet and text encoders; per request, sharing forwards when batching is on).

Target (issue 33): the server at most 1.05x the bare pipeline.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from server_process import ServerProcess, server_ms, start_server  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "sdxl.json"
PROMPT = "a lighthouse on a cliff at dusk, volumetric light"
CASES: dict[str, dict[str, Any]] = {
    "tiny": {"size": 64, "steps": 8},
    "mid": {"size": 256, "steps": 8},
}
GUIDANCE = 5.0


def graph(size: int, steps: int, seed: int, lora: str | None = None) -> dict[str, Any]:
    """The render's graph; `lora`: a file in loras/ wired into the node (strength 0.8)."""
    made: dict[str, Any] = {
        "schemaVersion": 1,
        "nodes": [
            {"id": "p", "type": "input/text", "params": {"text": PROMPT}},
            {
                "id": "x",
                "type": "stability/sdxl",
                "params": {
                    "width": size,
                    "height": size,
                    "steps": steps,
                    "guidance": GUIDANCE,
                    "seed": seed,
                    "sampler": "euler",
                    "schedule": "ddim_uniform",
                },
                "inputs": {"prompt": {"from": "p", "output": "text"}},
            },
        ],
    }
    if lora is not None:
        node = {"id": "l", "type": "input/lora", "params": {"name": lora, "strength": 0.8}}
        made["nodes"].insert(0, node)
        made["nodes"][-1]["inputs"]["loras"] = [{"from": "l", "output": "lora"}]
    return made


def server_render(
    server: ServerProcess, size: int, steps: int, seed: int, lora: str | None = None
) -> float:
    return server_ms(server, graph(size, steps, seed, lora))


class PipelineSide:
    def __init__(self, folder: Path) -> None:
        import torch

        from inline_core.diffusion.libs import diffusers

        self.torch = torch
        lib = diffusers()
        pipe: Any = lib.StableDiffusionXLPipeline.from_pretrained(
            str(folder), dtype=torch.float32, local_files_only=True
        )
        pipe.scheduler = lib.EulerDiscreteScheduler.from_config(pipe.scheduler.config)
        pipe.set_progress_bar_config(disable=True)
        self.pipe = pipe

    def render(self, size: int, steps: int, seed: int) -> float:
        t0 = time.perf_counter()
        self.pipe(
            prompt=PROMPT,
            negative_prompt="",
            width=size,
            height=size,
            num_inference_steps=steps,
            guidance_scale=GUIDANCE,
            generator=self.torch.Generator("cpu").manual_seed(seed),
        )
        return (time.perf_counter() - t0) * 1000


def paired(work: Path, name: str, renders: int) -> dict[str, Any]:
    case = CASES[name]
    models = work / f"models_{name}"  # one model each: the node's empty `model` finds it
    folder = models / "diffusion_models" / f"sdxl_{name}_diffusers"
    pipeline = PipelineSide(folder)
    server = start_server(
        models, work / f"data_{name}", work / f"server_{name}.log", env={"INLINE_DTYPE": "float32"}
    )
    ours: list[float] = []
    theirs: list[float] = []
    try:
        for seed in range(renders + 1):  # the first of each side loads: left out
            ours.append(server_render(server, case["size"], case["steps"], seed))
            theirs.append(pipeline.render(case["size"], case["steps"], seed))
    finally:
        server.stop()
    server_ms, pipeline_ms = statistics.median(ours[1:]), statistics.median(theirs[1:])
    return {
        "case": name,
        "size": case["size"],
        "steps": case["steps"],
        "server_ms": round(server_ms, 1),
        "pipeline_ms": round(pipeline_ms, 1),
        "ratio": round(server_ms / pipeline_ms, 3),
        "first_server_ms": round(ours[0], 1),
        "first_pipeline_ms": round(theirs[0], 1),
    }


# `--loras`: the concurrent renders cycle through no LoRA and the kit's two kohya LoRAs.
LORA_CYCLE = (None, "sdxl_tiny_lora_a.safetensors", "sdxl_tiny_lora_b.safetensors")


def concurrent(work: Path, count: int, batching: bool, loras: bool = False) -> dict[str, Any]:
    models = work / ("models_tiny_loras" if loras else "models_tiny")
    env = {"INLINE_DTYPE": "float32", **({} if batching else {"INLINE_MAX_BATCH": "1"})}
    label = ("on" if batching else "off") + (", mixed LoRAs" if loras else "")
    tag = label.replace(", ", "_").replace(" ", "_")
    server = start_server(models, work / f"data_c_{tag}", work / f"c_{tag}.log", env=env)
    size, steps = CASES["tiny"]["size"], CASES["tiny"]["steps"]
    try:
        server_render(server, size, steps, 999)  # loads
        t0 = time.perf_counter()
        with ThreadPoolExecutor(count) as pool:

            def one(seed: int) -> float:
                lora = LORA_CYCLE[seed % len(LORA_CYCLE)] if loras else None
                return server_render(server, size, steps, seed, lora)

            list(pool.map(one, range(count)))
        wall = (time.perf_counter() - t0) * 1000
    finally:
        server.stop()
    return {"batching": label, "renders": count, "wall_ms": round(wall, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description="SDXL: the server vs a bare pipeline")
    parser.add_argument("--renders", type=int, default=5)
    parser.add_argument("--sizes", default="tiny,mid")
    parser.add_argument("--concurrent", type=int, default=8)
    parser.add_argument("--loras", action="store_true", help="also concurrent mixed-LoRA runs")
    args = parser.parse_args()
    from inline_core.families.sdxl.kit import build_kit

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        sizes = [s for s in args.sizes.split(",") if s]
        for size in {*sizes, "tiny"}:
            build_kit(work / f"models_{size}", size, layouts=("diffusers",), dtype="float32")
        rows = [paired(work, size, args.renders) for size in sizes]
        if args.loras:  # a checkpoint and its kohya LoRAs (the comfy layout) beside the folder
            build_kit(work / "models_tiny_loras", "tiny", layouts=("comfy",), dtype="float32")
        mixes = (False, True) if args.loras else (False,)
        batches = [
            concurrent(work, args.concurrent, on, mixed) for mixed in mixes for on in (True, False)
        ]
    print(f"{'case':6} {'size':>5} {'server ms':>10} {'pipeline ms':>12} {'ratio':>6}")
    for r in rows:
        print(
            f"{r['case']:6} {r['size']:>5} {r['server_ms']:>10} {r['pipeline_ms']:>12} "
            f"{r['ratio']:>6}"
        )
    for b in batches:
        print(f"{args.concurrent} concurrent, batching {b['batching']}: {b['wall_ms']} ms")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    report = {"paired": rows, "concurrent": batches, "loadavg": [round(x, 2) for x in load]}
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {RESULTS} (load average {load[0]:.1f})")


if __name__ == "__main__":
    main()
