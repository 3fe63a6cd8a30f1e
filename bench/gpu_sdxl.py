"""Full-size SDXL with random weights on a GPU: the server vs a bare `StableDiffusionXLPipeline`.

Run on a GPU machine: `python bench/gpu_sdxl.py [--size 1024] [--steps 30] [--renders 2]
[--workdir DIR]`. Needs nothing from the network: it writes its own random-weight models.

SDXL base's shapes: the UNet (320/640/1280 channels, 1/2/10 transformer blocks, 2.6B
parameters), the VAE (128..512 channels), CLIP-L (768 wide, 12 layers) and OpenCLIP-G (1280 wide,
32 layers), with the kit's byte-level CLIP tokenizer (its small vocabulary: the encoders run once
a render). Weights are N(0, 0.02) (norms one), written as one diffusers folder in float16 that
both sides load. A render is 1024x1024, 30 steps of Euler on SDXL's leading timesteps, guidance
5: `StableDiffusionXLPipeline` in float16 on the device, and the server (its own process, the
device policy's choice of dtype and placement; `POST /v1/runs` until `run_done`, the PNG take
written), alternating seed by seed, the first of each side (it loads) left out.

`--lora` adds a random kohya LoRA (the kit's: rank 4 on every transformer block's attention,
feed-forward and projections, and both text encoders; `kit_loras.py`) rendered by the server per
request at strength 0.8 beside the plain renders, and by the pipeline after `load_lora_weights`
(PEFT layers, unfused): each side's cost of a LoRA.

`--size 64 --steps 4 --device cpu --preset tiny` smoke-tests it anywhere. Results:
bench/results/gpu_sdxl.json, copied to $OUT when it is set.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_common import randomize  # noqa: E402
from sdxl_server_vs_pipeline import server_render  # noqa: E402
from server_process import start_server  # noqa: E402

from inline_core.diffusion.libs import diffusers, manual_seed, transformers  # noqa: E402
from inline_core.families.sdxl import kit  # noqa: E402
from inline_core.families.sdxl.kit_loras import write_kit_loras  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "gpu_sdxl.json"
FULL_UNET: dict[str, Any] = {
    **kit.unet_config("tiny"),
    "block_out_channels": (320, 640, 1280),
    "layers_per_block": 2,
    "transformer_layers_per_block": (1, 2, 10),
    "down_block_types": ["DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"],
    "up_block_types": ["CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"],
    "attention_head_dim": [5, 10, 20],
    "cross_attention_dim": 2048,
    "projection_class_embeddings_input_dim": 2816,
}
FULL_VAE: dict[str, Any] = {
    **kit.VAE_CONFIG,
    "block_out_channels": [128, 256, 512, 512],
    "layers_per_block": 2,
}


def build(folder: Path, preset: str, device: str) -> float:
    started = time.perf_counter()
    lib, tlib = diffusers(), transformers()
    manual_seed(0)
    full = preset == "full"
    l_config = kit.clip_config(768 if full else kit.L_WIDTH, 768, "quick_gelu")
    g_width = 1280 if full else kit.G_WIDTH
    g_config = kit.clip_config(g_width, g_width if full else kit.G_PROJECTION, "gelu")
    if full:  # CLIP-L's and OpenCLIP-G's depths
        l_config.num_hidden_layers, g_config.num_hidden_layers = 12, 32
        l_config.intermediate_size, g_config.intermediate_size = 3072, 5120
    with torch.device(device):
        unet = lib.UNet2DConditionModel(**(FULL_UNET if full else kit.unet_config("tiny")))
        vae = lib.AutoencoderKL(**(FULL_VAE if full else kit.VAE_CONFIG))
        first = tlib.CLIPTextModel(l_config)
        second = tlib.CLIPTextModelWithProjection(g_config)
    for module in (unet, vae, first, second):
        randomize(module)
    scratch = folder.parent / ".tokenizers"
    pipe = lib.StableDiffusionXLPipeline(
        vae=vae.half(),
        text_encoder=first.half(),
        text_encoder_2=second.half(),
        tokenizer=kit.build_tokenizer(scratch / "tokenizer"),
        tokenizer_2=kit.build_tokenizer(scratch / "tokenizer_2", pad_token="!"),
        unet=unet.half(),
        scheduler=lib.EulerDiscreteScheduler(**kit.SCHEDULER_CONFIG),
    )
    pipe.save_pretrained(str(folder))
    shutil.rmtree(scratch)
    write_kit_loras(folder.parents[1], "bench", unet.float(), first.float(), second.float())
    return time.perf_counter() - started


def pipeline_render(pipe: Any, device: str, size: int, steps: int, seed: int) -> float:
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    pipe(
        prompt="a lighthouse",
        negative_prompt="",
        width=size,
        height=size,
        num_inference_steps=steps,
        guidance_scale=5.0,
        generator=torch.Generator("cpu").manual_seed(seed),
    )
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1000


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--preset", choices=("full", "tiny"), default="full")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--renders", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--lora", action="store_true", help="also time a per-request LoRA")
    args = parser.parse_args()
    device = str(args.device)
    if device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device: run on a GPU machine, or use --preset tiny --device cpu")
        return 2
    work = args.workdir or Path(tempfile.mkdtemp(prefix="sdxl-gpu-"))
    models = work / "models"
    folder = models / "diffusion_models" / f"sdxl_{args.preset}_random"
    built_s = build(folder, str(args.preset), device)
    dtype = torch.float16 if device.startswith("cuda") else torch.float32
    pipe: Any = (
        diffusers()
        .StableDiffusionXLPipeline.from_pretrained(str(folder), dtype=dtype, local_files_only=True)
        .to(device)
    )
    pipe.set_progress_bar_config(disable=True)
    env = {"INLINE_PROFILE": "" if device.startswith("cuda") else "cpu"}
    server = start_server(models, work / "data", work / "server.log", env=env, timeout_s=600)
    size, steps = int(args.size), int(args.steps)
    ours: list[float] = []
    theirs: list[float] = []
    lora = "bench_lora_a.safetensors" if args.lora else None
    ours_lora: list[float] = []
    theirs_lora: list[float] = []
    try:
        for seed in range(int(args.renders) + 1):
            ours.append(server_render(server, size, steps, seed))
            theirs.append(pipeline_render(pipe, device, size, steps, seed))
            if lora is not None:
                ours_lora.append(server_render(server, size, steps, seed, lora))
        if lora is not None:
            pipe.load_lora_weights(str(models / "loras" / lora), adapter_name="a")
            pipe.set_adapters(["a"], adapter_weights=[0.8])
            for seed in range(int(args.renders) + 1):
                theirs_lora.append(pipeline_render(pipe, device, size, steps, seed))
    finally:
        server.stop()
    server_ms, pipeline_ms = statistics.median(ours[1:]), statistics.median(theirs[1:])
    row = {
        "preset": args.preset,
        "device": torch.cuda.get_device_name() if device.startswith("cuda") else device,
        "size": size,
        "steps": steps,
        "build_s": round(built_s, 1),
        "server_ms": round(server_ms, 1),
        "pipeline_ms": round(pipeline_ms, 1),
        "ratio": round(server_ms / pipeline_ms, 3),
        "first_server_ms": round(ours[0], 1),
        "first_pipeline_ms": round(theirs[0], 1),
    }
    if lora is not None:
        lora_ms, pipe_lora_ms = statistics.median(ours_lora[1:]), statistics.median(theirs_lora[1:])
        row |= {
            "server_lora_ms": round(lora_ms, 1),
            "server_lora_over_plain": round(lora_ms / server_ms, 3),
            "pipeline_lora_ms": round(pipe_lora_ms, 1),
            "pipeline_lora_over_plain": round(pipe_lora_ms / pipeline_ms, 3),
            "first_server_lora_ms": round(ours_lora[0], 1),
        }
    print(json.dumps(row))
    results = RESULTS if args.preset == "full" else RESULTS.with_name("gpu_sdxl_smoke.json")
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps(row, indent=2) + "\n")
    out = os.environ.get("OUT")
    if out:
        shutil.copy(results, Path(out) / results.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
