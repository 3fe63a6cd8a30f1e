"""Krea 2 through the server vs the same render by a bare diffusers `Krea2Pipeline`, and the
server's batching on and off at 8 concurrent renders of one size.

Run by hand: `GOMP_SPINCOUNT=0 python bench/krea2_server_vs_pipeline.py [--renders 5]
[--sizes tiny,mid] [--concurrent 8]`.

The kit's random-weight base models (tiny: 64x64; mid: an 8-layer, 768-wide transformer at
256x256, `build_kit(size="mid")`), 8 steps at guidance 4.5 with a negative prompt, CPU float32,
both sides loading the same diffusers folder. The server is `python -m inline_core.server` in its
own process (`server_process.py`); a render is `POST /v1/runs` (input/text -> krea/krea-2) until
the run's websocket says `run_done` (the PNG take written, fsynced and committed). The sides
alternate seed by seed (`paired_renders.py`). Prints a table and writes bench/results/krea2.json.

Target (issue 35): the server at most 1.05x the bare pipeline.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from paired_renders import concurrent_ms, paired  # noqa: E402
from server_process import ServerProcess, server_ms, start_server  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "krea2.json"
PROMPT = "a paper boat on a puddle after the rain"
NEGATIVE = "blurry"
CASES: dict[str, dict[str, Any]] = {"tiny": {"size": 64}, "mid": {"size": 256}}
STEPS = 8
GUIDANCE = 4.5
ENV = {"INLINE_DTYPE": "float32"}


def graph(size_name: str, seed: int) -> dict[str, Any]:
    size = CASES[size_name]["size"]
    params = {
        "model": f"krea2_{size_name}_diffusers",
        "width": size,
        "height": size,
        "steps": STEPS,
        "guidance": GUIDANCE,
        "negative_prompt": NEGATIVE,
        "seed": seed,
    }
    return {
        "schemaVersion": 1,
        "nodes": [
            {"id": "p", "type": "input/text", "params": {"text": PROMPT}},
            {
                "id": "x",
                "type": "krea/krea-2",
                "params": params,
                "inputs": {"prompt": {"from": "p", "output": "text"}},
            },
        ],
    }


class Bare:
    """diffusers' own pipeline over the kit's folder, rendering to numpy (no PNG)."""

    def __init__(self, folder: Path, size: int) -> None:
        import torch

        from inline_core.diffusion.libs import diffusers

        self.torch, self.size = torch, size
        pipe: Any = diffusers().Krea2Pipeline.from_pretrained(
            str(folder), dtype=torch.float32, local_files_only=True
        )
        pipe.set_progress_bar_config(disable=True)
        self.pipe = pipe

    def render(self, seed: int) -> float:
        t0 = time.perf_counter()
        self.pipe(
            prompt=PROMPT,
            negative_prompt=NEGATIVE,
            width=self.size,
            height=self.size,
            num_inference_steps=STEPS,
            guidance_scale=GUIDANCE,
            generator=self.torch.Generator("cpu").manual_seed(seed),
            output_type="np",
        )
        return (time.perf_counter() - t0) * 1000


def side_by_side(work: Path, name: str, renders: int) -> dict[str, Any]:
    models = work / f"models_{name}"
    bare = Bare(models / "diffusion_models" / f"krea2_{name}_diffusers", CASES[name]["size"])
    server = start_server(models, work / f"data_{name}", work / f"server_{name}.log", env=ENV)
    try:
        row = paired(lambda seed: server_ms(server, graph(name, seed)), bare.render, renders)
    finally:
        server.stop()
    return {"case": name, "size": CASES[name]["size"], **row}


def batching(work: Path, count: int, on: bool) -> dict[str, Any]:
    env = {**ENV, **({} if on else {"INLINE_MAX_BATCH": "1"})}
    tag = "on" if on else "off"
    server: ServerProcess = start_server(
        work / "models_tiny", work / f"data_c_{tag}", work / f"c_{tag}.log", env=env
    )
    try:
        server_ms(server, graph("tiny", 999))  # loads
        wall = concurrent_ms(lambda seed: server_ms(server, graph("tiny", seed)), count)
    finally:
        server.stop()
    return {"batching": tag, "renders": count, "wall_ms": round(wall, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description="Krea 2: the server vs a bare pipeline")
    parser.add_argument("--renders", type=int, default=5)
    parser.add_argument("--sizes", default="tiny,mid")
    parser.add_argument("--concurrent", type=int, default=8)
    args = parser.parse_args()
    from inline_core.families.krea2.kit import build_kit

    sizes = [s for s in str(args.sizes).split(",") if s]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name in {*sizes, "tiny"}:  # the concurrent renders use the tiny model
            build_kit(work / f"models_{name}", name)
        rows = [side_by_side(work, name, args.renders) for name in sizes]
        walls = [batching(work, args.concurrent, on) for on in (True, False)]
    print(f"{'case':6} {'size':>5} {'server ms':>10} {'pipeline ms':>12} {'ratio':>6}")
    for r in rows:
        print(
            f"{r['case']:6} {r['size']:>5} {r['server_ms']:>10} {r['pipeline_ms']:>12} "
            f"{r['ratio']:>6}"
        )
    for w in walls:
        line = f"{w['renders']} concurrent tiny renders, batching {w['batching']}"
        print(f"{line}: {w['wall_ms']} ms")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    result = {"rows": rows, "concurrent": walls, "host": platform.node()}
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
