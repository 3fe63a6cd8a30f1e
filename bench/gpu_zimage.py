"""Full-size Z-Image with random weights on a GPU: the server vs a bare `ZImagePipeline`, bf16.

Run on a GPU machine: `python bench/gpu_zimage.py [--sizes 512,1024] [--renders 5]
[--workdir DIR]`. Needs nothing from the network: it writes its own random-weight model.

The transformer has Z-Image Turbo's real shape (dim 3840, 30 layers + 2 + 2 refiner layers, 30
heads; about 6.2B parameters, 12 GB in bf16), the VAE the FLUX shape. The Qwen3 text encoder has the
real width (2560) but 2 layers and the kit's byte-level tokenizer: it runs once per render, so a
full 4B encoder would add load time, not per-render time. Weights are drawn N(0, 0.02) so
activations stay finite in bf16 through 30 layers. Everything is written as one diffusers folder
that both sides load, then `zimage_server_vs_pipeline.measure_paired` alternates renders between
the bare pipeline and the server (uvicorn on loopback, `POST /v1/runs` until `run_done`) at each
size, 8 steps, no guidance. The table adds the physical floor: the transformer's FLOPs per render
at the GPU's dense bf16 peak (`--peak-tflops`, 989 for an H100/H200 SXM).

Then, unless `--parts` leaves it out, step-level batching on against off (`gpu_batching.py`): N
concurrent renders (`--concurrency`, default 1,2,4,8) through a `StepLoopSampler` with the device's
limits (or `--max-batch` / `--token-budget`) against one with `max_batch=1`, at the same sizes,
`--batch-steps` steps, `--batch-rounds` rounds: throughput, p50/p95 latency and on/off ratios, a
table and the JSON's "batching".

`--preset tiny --device cpu` runs the same script on the kit's tiny shapes (a smoke test on any
machine). Results: bench/results/gpu_zimage.json (a smoke run writes gpu_zimage_smoke.json),
copied to $OUT when it is set.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_batching import measure_batching, print_table  # noqa: E402
from gpu_common import randomize  # noqa: E402
from zimage_server_vs_pipeline import measure_paired  # noqa: E402

from inline_core.diffusion.libs import diffusers, manual_seed, transformers  # noqa: E402
from inline_core.families.zimage.kit import (  # noqa: E402
    SCHEDULER_CONFIG,
    TRANSFORMER_CONFIGS,
    VAE_CONFIG,
    build_tokenizer,
    qwen3_config,
)
from inline_core.families.zimage.transformer import axes_dims  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "gpu_zimage.json"
FULL_TRANSFORMER: dict[str, Any] = {
    "dim": 3840,
    "n_layers": 30,
    "n_refiner_layers": 2,
    "n_heads": 30,
    "n_kv_heads": 30,
    "cap_feat_dim": 2560,
}
FULL_VAE: dict[str, Any] = {
    **VAE_CONFIG,
    "block_out_channels": [128, 256, 512, 512],
    "layers_per_block": 2,
}
CAPTION_TOKENS = 48  # about what a one-line prompt with its chat template takes


def transformer_config(preset: str) -> dict[str, Any]:
    base = (
        FULL_TRANSFORMER
        if preset == "full"
        else {**TRANSFORMER_CONFIGS["tiny"], "cap_feat_dim": 32}
    )
    head_dim = base["dim"] // base["n_heads"]
    return {
        **base,
        "all_patch_size": (2,),
        "all_f_patch_size": (1,),
        "in_channels": 16,
        "qk_norm": True,
        "rope_theta": 256.0,
        "t_scale": 1000.0,
        "axes_dims": axes_dims(head_dim),
        "axes_lens": [1536, 512, 512],
    }


def build_model(folder: Path, preset: str, device: str) -> dict[str, Any]:
    """Write the random model as a diffusers folder; returns what was built and how long it took."""
    started = time.perf_counter()
    lib, tlib = diffusers(), transformers()
    manual_seed(0)
    cfg = transformer_config(preset)
    with torch.device(device):
        transformer = lib.ZImageTransformer2DModel(**cfg)
    randomize(transformer)
    transformer = transformer.to(torch.bfloat16)
    tokenizer = build_tokenizer()
    te_config = qwen3_config(len(tokenizer), hidden_size=cfg["cap_feat_dim"])
    if preset == "full":
        te_config.num_attention_heads, te_config.num_key_value_heads = 32, 8
        te_config.head_dim, te_config.intermediate_size = 128, 9728
    with torch.device(device):
        text_encoder = tlib.Qwen3Model(te_config)
        vae = lib.AutoencoderKL(**(FULL_VAE if preset == "full" else VAE_CONFIG))
    randomize(text_encoder)
    pipe = lib.ZImagePipeline(
        scheduler=lib.FlowMatchEulerDiscreteScheduler(**SCHEDULER_CONFIG),
        vae=vae,
        text_encoder=text_encoder.to(torch.bfloat16),
        tokenizer=tokenizer,
        transformer=transformer,
    )
    pipe.save_pretrained(str(folder))
    params = sum(p.numel() for p in transformer.parameters())
    del pipe, transformer, text_encoder, vae
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return {"transformerParams": params, "buildS": round(time.perf_counter() - started, 1)}


def transformer_flops(cfg: dict[str, Any], size: int, steps: int) -> float:
    """Forward FLOPs of a render's denoise (matmuls and attention), the floor's numerator."""
    dim, ffn = cfg["dim"], int(cfg["dim"] / 3 * 8)
    img = (size // 16) ** 2
    cap = CAPTION_TOKENS

    def layer(tokens: int) -> float:
        return 2 * tokens * (4 * dim * dim + 3 * dim * ffn) + 4 * tokens * tokens * dim

    per_step = cfg["n_layers"] * layer(img + cap) + cfg["n_refiner_layers"] * (
        layer(img) + layer(cap)
    )
    return per_step * steps


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--preset", choices=("full", "tiny"), default="full")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--sizes", default="512,1024")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--renders", type=int, default=5)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--peak-tflops", type=float, default=989.0)
    parser.add_argument("--parts", default="paired,batching")
    parser.add_argument("--concurrency", default="1,2,4,8")
    parser.add_argument("--batch-steps", type=int, default=8)
    parser.add_argument("--batch-rounds", type=int, default=2)
    parser.add_argument("--max-batch", type=int, default=None, help="on side; default: device's")
    parser.add_argument("--token-budget", type=int, default=None)
    args = parser.parse_args()
    parts = str(args.parts).split(",")
    sizes = [int(s) for s in str(args.sizes).split(",") if s]
    device, preset = str(args.device), str(args.preset)
    if device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device: run on a GPU machine, or use --preset tiny --device cpu")
        return 2
    workdir = cast(Path | None, args.workdir) or Path(tempfile.mkdtemp(prefix="zimage-gpu-"))
    models = workdir / "models"
    name = f"zimage_{preset}_random"
    folder = models / "diffusion_models" / name
    built: dict[str, Any] = {"reused": True}
    if not (folder / "model_index.json").is_file():
        shutil.rmtree(folder, ignore_errors=True)
        built = build_model(folder, preset, device)
    for category in ("vae", "text_encoders"):
        (models / category).mkdir(parents=True, exist_ok=True)
    dtype = "bfloat16" if device.startswith("cuda") else "float32"
    profile = None if device.startswith("cuda") else "cpu"  # the server's policy decides on a GPU
    cfg = transformer_config(preset)
    rows: list[dict[str, Any]] = []
    for size in sizes if "paired" in parts else []:
        case: dict[str, Any] = {"model": name, "size": size, "steps": int(args.steps)}
        if device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        paired = measure_paired(
            models, case, int(args.renders), device=device, dtype=dtype, profile=profile
        )
        t = cast(dict[str, list[float]], paired["times"])
        p_med, t_med, s_med = (statistics.median(t[k]) for k in ("pipeline", "trimmed", "server"))
        floor_ms = transformer_flops(cfg, size, case["steps"]) / (args.peak_tflops * 1e12) * 1000
        row: dict[str, Any] = {
            **case,
            "pipelineMedianMs": round(p_med, 1),
            "pipelineTrimmedMedianMs": round(t_med, 1),
            "serverMedianMs": round(s_med, 1),
            "addedMs": round(s_med - p_med, 1),
            "ratio": round(s_med / p_med, 4),
            "ratioVsTrimmed": round(s_med / t_med, 4),
            "floorMs": round(floor_ms, 1),
            "serverVsFloor": round(s_med / floor_ms, 2),
            "pipelineFirstMs": round(paired["first"]["pipeline"], 1),
            "serverFirstMs": round(paired["first"]["server"], 1),
            "serverLoadsAfterFirst": paired["loadsAfterFirst"],
            "serverLoadsAfterAll": paired["loadsAfterAll"],
            "ms": t,
        }
        if device.startswith("cuda"):
            row["peakGpuMb"] = round(torch.cuda.max_memory_allocated() / 2**20)
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "ms"}), flush=True)
    if rows:
        print(
            f"{'px':>5} {'pipe ms':>9} {'trimmed':>9} {'server ms':>10} {'ratio':>7}"
            f" {'floor ms':>9}"
        )
    for r in rows:
        print(
            f"{r['size']:>5} {r['pipelineMedianMs']:>9.1f} {r['pipelineTrimmedMedianMs']:>9.1f} "
            f"{r['serverMedianMs']:>10.1f} {r['ratio']:>7.3f} {r['floorMs']:>9.1f}"
        )
    batching: dict[str, Any] | None = None
    if "batching" in parts:
        cases = [
            {
                "name": preset,
                "kit": preset,
                "model": name,
                "shapes": [(size, int(args.batch_steps))],
            }
            for size in sizes
        ]
        levels = [int(n) for n in str(args.concurrency).split(",") if n]
        if device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        batching = measure_batching(
            models,
            cases,
            levels,
            int(args.batch_rounds),
            device=device,
            profile=profile,
            max_batch=cast(int | None, args.max_batch),
            token_budget=cast(int | None, args.token_budget),
        )
        if device.startswith("cuda"):
            batching["peakGpuMb"] = round(torch.cuda.max_memory_allocated() / 2**20)
        print(f"batching on {batching['limitsOn']} vs off (max_batch 1), sampler path")
        print_table(batching["rows"])
    body = {"preset": preset, "model": built, "rows": rows, "batching": batching}
    write_results(RESULTS, body, device=device, preset=preset)
    return 0


def write_results(results: Path, body: dict[str, Any], *, device: str, preset: str) -> Path:
    """Write `body` with the machine, copied to $OUT when it is set. A smoke run (tiny preset or
    no GPU) writes `<name>_smoke.json`, so it never overwrites the GPU figures."""
    gpu = torch.cuda.get_device_name(0) if device.startswith("cuda") else platform.processor()
    machine = {"device": gpu, "platform": platform.platform(), "torch": torch.__version__}
    if not (preset == "full" and device.startswith("cuda")):
        results = results.with_name(f"{results.stem}_smoke.json")
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps({"machine": machine, **body}, indent=2) + "\n")
    out = os.environ.get("OUT")
    if out:
        shutil.copy(results, Path(out) / results.name)
    print(f"wrote {results}")
    return results


if __name__ == "__main__":
    sys.exit(main())
