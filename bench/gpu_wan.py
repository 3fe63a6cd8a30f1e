"""Full-size Wan with random weights on a GPU: the server vs bare diffusers pipelines, bf16.

Run on a GPU machine: `python bench/gpu_wan.py [--cases ...] [--steps 10] [--renders 1]
[--workdir DIR]`. Needs nothing from the network: it writes its own random-weight models.

- Wan 2.1 1.3B (dim 1536, 30 layers, 12 heads) with the Wan 2.1 VAE, text-to-video at 832x480,
  81 frames;
- Wan 2.2 TI2V-5B (dim 3072, 30 layers, 24 heads, 48 channels) with the Wan 2.2 VAE, text-to-video
  and image-to-video at 1280x704, 121 frames;
- Wan 2.2 A14B's two experts (the 14B's width: dim 5120, 40 heads, ffn 13824, but 10 of its 40
  layers each, so two experts' random weights build, load and run within one 10-minute call) with
  the Wan 2.1 VAE, text-to-video at 832x480, 81 frames, switching expert at 0.875 (shift 12: 10
  steps run 7 on the high-noise expert, 3 on the low-noise one).

The UMT5 has the real width (4096) but 2 layers and the kit's byte-level tokenizer: it runs once
per render, so the full 5.7B encoder would add load time, not per-render time. Weights are drawn
N(0, 0.02) so activations stay finite in bf16. Each model is one diffusers folder both sides load;
`wan_tiny.bench_case` alternates renders between the bare pipeline (`WanPipeline`, or
`WanImageToVideoPipeline` for image-to-video) and the server (uvicorn on loopback, `POST /v1/runs`
until `run_done`, a lossless APNG take), guidance 4, `--steps` steps (10 by default, to fit a
10-minute call; the published 50 scale the denoise linearly).

`--preset tiny --device cpu` runs the same script on the kit's tiny shapes (a smoke test on any
machine). Results: bench/results/gpu_wan.json (a smoke run writes gpu_wan_smoke.json), copied to
$OUT when it is set.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_zimage import randomize, write_results  # noqa: E402
from wan_tiny import Case, Server, bench_case  # noqa: E402

from inline_core.diffusion.libs import diffusers, manual_seed, transformers  # noqa: E402
from inline_core.families.wan.files import DEFAULT_SCHEDULER_CONFIG  # noqa: E402
from inline_core.families.wan.kit import (  # noqa: E402
    A14B_BOUNDARY,
    A14B_SCHEDULER_CONFIG,
    TI2V_SCHEDULER_CONFIG,
    TI2V_TRANSFORMER_CONFIG,
    TI2V_VAE_CONFIG,
    TRANSFORMER_CONFIG,
    VAE_CONFIG,
    build_tokenizer,
    umt5_config,
)

RESULTS = ROOT / "bench" / "results" / "gpu_wan.json"
A14B_LAYERS = 10  # of the published 40, per expert (see the docstring)
COMMON: dict[str, Any] = {
    "patch_size": [1, 2, 2],
    "attention_head_dim": 128,
    "text_dim": 4096,
    "freq_dim": 256,
    "cross_attn_norm": True,
    "qk_norm": "rms_norm_across_heads",
    "eps": 1e-6,
    "rope_max_seq_len": 1024,
}
FULL: dict[str, dict[str, Any]] = {
    "wan21": {
        "transformer": {**COMMON, "num_attention_heads": 12, "ffn_dim": 8960, "num_layers": 30,
                        "in_channels": 16, "out_channels": 16},
        "vae": {"base_dim": 96, "z_dim": 16},
        "scheduler": DEFAULT_SCHEDULER_CONFIG,
    },
    "wan22": {
        "transformer": {**COMMON, "num_attention_heads": 24, "ffn_dim": 14336, "num_layers": 30,
                        "in_channels": 48, "out_channels": 48},
        "vae": {**TI2V_VAE_CONFIG, "base_dim": 160, "decoder_base_dim": 256},
        "scheduler": TI2V_SCHEDULER_CONFIG,
    },
    "a14b": {
        "transformer": {**COMMON, "num_attention_heads": 40, "ffn_dim": 13824,
                        "num_layers": A14B_LAYERS, "in_channels": 16, "out_channels": 16},
        "vae": {"base_dim": 96, "z_dim": 16},
        "scheduler": A14B_SCHEDULER_CONFIG,
    },
}  # fmt: skip
TINY: dict[str, dict[str, Any]] = {
    "wan21": {"transformer": TRANSFORMER_CONFIG, "vae": VAE_CONFIG,
              "scheduler": DEFAULT_SCHEDULER_CONFIG},
    "wan22": {"transformer": TI2V_TRANSFORMER_CONFIG, "vae": TI2V_VAE_CONFIG,
              "scheduler": TI2V_SCHEDULER_CONFIG},
    "a14b": {"transformer": TRANSFORMER_CONFIG, "vae": VAE_CONFIG,
             "scheduler": A14B_SCHEDULER_CONFIG},
}  # fmt: skip
# A mid-size Wan 2.1 for the CPU benches (bench/wan_video.py): a transformer of about 100M
# parameters (dim 768, 10 layers) on the kit's tiny UMT5, and the Wan 2.1 VAE's layout at a third
# of its width (base 32, not 96: the real one decodes a 128 px latent frame in about 7 s on one
# thread here, which would leave the decode all a CPU bench measures).
MID: dict[str, dict[str, Any]] = {
    "wan21": {
        "transformer": {**TRANSFORMER_CONFIG, "num_attention_heads": 6, "attention_head_dim": 128,
                        "ffn_dim": 3072, "num_layers": 10},
        "vae": {"base_dim": 32, "z_dim": 16},
        "scheduler": DEFAULT_SCHEDULER_CONFIG,
    },
}  # fmt: skip
RECIPES = {"full": FULL, "mid": MID, "tiny": TINY}
SIZES = {  # case: (model, width, height, frames, image), full and tiny
    "full": {
        "wan2.1-1.3b-t2v": ("wan21", 832, 480, 81, False),
        "wan2.2-5b-t2v": ("wan22", 1280, 704, 121, False),
        "wan2.2-5b-i2v": ("wan22", 1280, 704, 121, True),
        "wan2.2-a14b-t2v": ("a14b", 832, 480, 81, False),
    },
    "tiny": {
        "wan2.1-1.3b-t2v": ("wan21", 48, 32, 9, False),
        "wan2.2-5b-t2v": ("wan22", 64, 32, 9, False),
        "wan2.2-5b-i2v": ("wan22", 64, 32, 9, True),
        "wan2.2-a14b-t2v": ("a14b", 48, 32, 9, False),
    },
}


def build_model(folder: Path, model: str, preset: str, device: str) -> dict[str, Any]:
    """Write one random model as a diffusers folder (`preset`: full, mid or tiny); returns its
    size and build time."""
    started = time.perf_counter()
    lib, tlib = diffusers(), transformers()
    recipe = RECIPES[preset][model]
    manual_seed(0)
    pair = model == "a14b"
    with torch.device(device):
        transformer = lib.WanTransformer3DModel(**recipe["transformer"])
        transformer_2 = lib.WanTransformer3DModel(**recipe["transformer"]) if pair else None
    tokenizer = build_tokenizer()
    te_config = umt5_config(len(tokenizer), int(tokenizer.pad_token_id))
    if preset == "full":  # the real width and heads, two layers
        te_config.d_model, te_config.d_kv, te_config.num_heads, te_config.d_ff = 4096, 64, 64, 10240
    with torch.device(device):
        text_encoder = tlib.UMT5EncoderModel(te_config)
        vae = lib.AutoencoderKLWan(**recipe["vae"])
    dtype = torch.bfloat16 if preset == "full" else torch.float32
    if preset == "full":  # the tiny preset keeps the kit's own initialisation
        randomize(transformer)
        randomize(text_encoder)
        if transformer_2 is not None:
            randomize(transformer_2)
    pipe = lib.WanPipeline(
        tokenizer=tokenizer,
        text_encoder=text_encoder.to(dtype),
        transformer=transformer.to(dtype),
        vae=vae,
        scheduler=lib.UniPCMultistepScheduler.from_config(recipe["scheduler"]),
        expand_timesteps=model == "wan22",
        transformer_2=None if transformer_2 is None else transformer_2.to(dtype),
        boundary_ratio=A14B_BOUNDARY if pair else None,
    )
    pipe.save_pretrained(str(folder))
    params = sum(p.numel() for p in transformer.parameters()) * (2 if pair else 1)
    del pipe, transformer, transformer_2, text_encoder, vae
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return {"transformerParams": params, "buildS": round(time.perf_counter() - started, 1)}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--preset", choices=("full", "tiny"), default="full")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--cases", default=",".join(SIZES["full"]))
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--renders", type=int, default=1)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    device, preset = str(args.device), str(args.preset)
    if device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device: run on a GPU machine, or use --preset tiny --device cpu")
        return 2
    chosen = [c for c in str(args.cases).split(",") if c]
    if unknown := sorted(set(chosen) - set(SIZES[preset])):
        print(f"unknown cases {unknown}; choose from {', '.join(SIZES[preset])}")
        return 2
    workdir = cast(Path | None, args.workdir) or Path(tempfile.mkdtemp(prefix="wan-gpu-"))
    models = workdir / "models"
    built: dict[str, Any] = {}
    cases: list[Case] = []
    for name in chosen:
        model, width, height, frames, image = SIZES[preset][name]
        folder_name = f"{model}_{preset}_random"
        folder = models / "diffusion_models" / folder_name
        if model not in built:
            built[model] = {"reused": True}
            if not (folder / "model_index.json").is_file():
                shutil.rmtree(folder, ignore_errors=True)
                built[model] = build_model(folder, model, preset, device)
            print(json.dumps({"built": model, **built[model]}), flush=True)
        steps = int(args.steps)
        cases.append(Case(name, folder_name, width, height, image, frames=frames, steps=steps))
    for category in ("vae", "text_encoders"):
        (models / category).mkdir(parents=True, exist_ok=True)
    dtype = "bfloat16" if device.startswith("cuda") else "float32"
    profile = None if device.startswith("cuda") else "cpu"  # the server's policy decides on a GPU
    server = Server(models, dtype=dtype, profile=profile)
    rows: list[dict[str, Any]] = []
    try:
        for case in cases:
            if device.startswith("cuda"):
                torch.cuda.reset_peak_memory_stats()
            row = bench_case(case, models, server, int(args.renders), device=device, dtype=dtype)
            if device.startswith("cuda"):
                row["peakGpuMb"] = round(torch.cuda.max_memory_allocated() / 2**20)
                torch.cuda.empty_cache()
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "ms"}), flush=True)
    finally:
        server.close()
    print(f"{'case':<16} {'size':>14} {'pipe ms':>10} {'server ms':>10} {'ratio':>6}")
    for r in rows:
        size = f"{r['width']}x{r['height']}x{r['frames']}"
        print(f"{r['case']:<16} {size:>14} {r['pipelineMedianMs']:>10.1f} "
              f"{r['serverMedianMs']:>10.1f} {r['ratio']:>6.3f}")  # fmt: skip
    body = {"preset": preset, "steps": int(args.steps), "models": built, "rows": rows}
    write_results(RESULTS, body, device=device, preset=preset)
    return 0


if __name__ == "__main__":
    sys.exit(main())
