"""Full-size Qwen-Image with random weights on a GPU: our step pipeline vs diffusers', bf16.

Run on a GPU machine: `python bench/gpu_qwen_image.py [--renders 1]`; a smoke run on any machine:
`python bench/gpu_qwen_image.py --preset tiny --device cpu`. Needs nothing from the network.

The transformer has Qwen-Image's real shape (60 blocks of width 3072, 24 heads of 128, text
width 3584: 20B parameters), the VAE the real Qwen-Image VAE's (base width 96); Qwen2.5-VL has its
real width (3584) but 2 layers and the kit's byte-level tokenizer (it runs once per render).
Weights are drawn N(0, 0.02) so activations stay finite in bf16. Both sides share the same
modules in memory: diffusers' `QwenImagePipeline(...)` called as a user calls it, and ours
(`QwenImageStepPipeline` driven by the step loop, `SampleJob`). Cases, at 1328x1328:
- `50 steps, true CFG 4`: the published setting (two rows a step);
- `Lightning 8 steps`: the step count the Lightning LoRAs distil to, guidance off (one row).
Prints a table and writes bench/results/gpu_qwen_image.json (copied to $OUT when set).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_common import randomize  # noqa: E402

from inline_core.device.policy import Placement  # noqa: E402
from inline_core.diffusion.libs import diffusers, manual_seed, transformers  # noqa: E402
from inline_core.diffusion.placement import OffloadSwap  # noqa: E402
from inline_core.families.qwen_image.denoiser import QwenImageDenoiser  # noqa: E402
from inline_core.families.qwen_image.encoder import QwenPromptEncoder  # noqa: E402
from inline_core.families.qwen_image.files import SCHEDULER_CONFIG  # noqa: E402
from inline_core.families.qwen_image.kit import (  # noqa: E402
    TRANSFORMER_CONFIGS,
    VAE_CONFIG,
    build_tokenizer,
    text_encoder_config,
)
from inline_core.families.qwen_image.pipeline import QwenImageStepPipeline  # noqa: E402
from inline_core.families.qwen_image.transformer import axes_dims  # noqa: E402
from inline_core.families.qwen_image.vae import QwenImageVAE  # noqa: E402
from inline_core.sampling.job import SampleJob  # noqa: E402
from inline_core.sampling.loop import StepLoopSampler  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "gpu_qwen_image.json"
PROMPT = "a neon sign that reads 'Inline' over a rainy alley, cinematic"
PRESETS: dict[str, dict[str, Any]] = {
    "full": {
        "transformer": {"num_layers": 60, "attention_head_dim": 128, "num_attention_heads": 24},
        "text_width": 3584,
        "vae_base": 96,
        "size": 1328,
    },
    "tiny": {
        "transformer": TRANSFORMER_CONFIGS["tiny"],
        "text_width": 32,
        "vae_base": 8,
        "size": 64,
    },
}
CASES = (("50 steps, true CFG 4", 50, 4.0), ("Lightning 8 steps", 8, 1.0))


def build(preset: dict[str, Any], device: str, dtype: torch.dtype) -> dict[str, Any]:
    lib, tlib = diffusers(), transformers()
    manual_seed(0)
    tokenizer = build_tokenizer()
    config = text_encoder_config(tokenizer)
    width = preset["text_width"]
    head = min(128, width // 2)
    config.text_config.hidden_size = width
    config.text_config.intermediate_size = width * 2
    config.text_config.num_attention_heads = width // head
    config.vision_config.out_hidden_size = width
    with torch.device(device):
        text_encoder = tlib.Qwen2_5_VLForConditionalGeneration(config).to(dtype).eval()
        cfg = preset["transformer"]
        model = lib.QwenImageTransformer2DModel(
            in_channels=64,
            out_channels=16,
            joint_attention_dim=width,
            axes_dims_rope=tuple(axes_dims(cfg["attention_head_dim"])),
            **cfg,
        )
        model = model.to(dtype).eval()
        vae = lib.AutoencoderKLQwenImage(**{**VAE_CONFIG, "base_dim": preset["vae_base"]})
        vae = vae.to(dtype).eval()
    for module in (text_encoder, model, vae):
        randomize(module)
    scheduler = lib.FlowMatchEulerDiscreteScheduler.from_config(SCHEDULER_CONFIG)
    return {
        "tokenizer": tokenizer,
        "text_encoder": text_encoder,
        "transformer": model,
        "vae": vae,
        "scheduler": scheduler,
    }


def ours(parts: dict[str, Any], device: str, dtype: str) -> QwenImageStepPipeline:
    placement = Placement(device=device, dtype=dtype)
    swap = OffloadSwap()
    vae = QwenImageVAE(parts["vae"], placement, swap)
    model = parts["text_encoder"].model  # its language model and vision tower
    encoder = QwenPromptEncoder(parts["tokenizer"], None, model, placement, swap, vae.resize)
    return QwenImageStepPipeline(
        text_encoder=encoder,
        denoiser=QwenImageDenoiser(parts["transformer"], placement, swap),
        vae=vae,
        scheduler_config=SCHEDULER_CONFIG,
        model_key="gpu",
        edit=False,
    )


def bare(pipe: Any, case: dict[str, Any]) -> None:
    """diffusers' pipeline as a user calls it (a negative prompt turns its true CFG on)."""
    pipe(
        prompt=PROMPT,
        negative_prompt="" if case["guidance"] > 1 else None,
        num_inference_steps=case["steps"],
        true_cfg_scale=case["guidance"],
        height=case["size"],
        width=case["size"],
        generator=torch.Generator("cpu").manual_seed(0),
        output_type="np",
    )


def request(mine: QwenImageStepPipeline, case: dict[str, Any]) -> Any:
    size = case["size"]
    return mine.request(
        prompt=PROMPT,
        steps=case["steps"],
        guidance=case["guidance"],
        width=size,
        height=size,
        seed=0,
    )


def ours_render(
    sampler: StepLoopSampler, mine: QwenImageStepPipeline, case: dict[str, Any]
) -> None:
    sampler.run(SampleJob(mine, request(mine, case)))


def timed(run: Any, sync: bool) -> float:
    t0 = time.perf_counter()
    run()
    if sync:
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description="Full-size Qwen-Image, random weights")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="full")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--renders", type=int, default=1)
    args = parser.parse_args()
    preset = PRESETS[args.preset]
    dtype_name = "bfloat16" if args.device.startswith("cuda") else "float32"
    dtype = getattr(torch, dtype_name)
    started = time.perf_counter()
    parts = build(preset, args.device, dtype)
    build_s = time.perf_counter() - started
    pipe: Any = diffusers().QwenImagePipeline(**parts)
    pipe.set_progress_bar_config(disable=True)
    mine = ours(parts, args.device, dtype_name)
    sampler = StepLoopSampler()
    sync = args.device.startswith("cuda")
    size = preset["size"]
    rows: list[dict[str, Any]] = []
    try:
        for name, steps, guidance in CASES:
            case = {"steps": steps, "guidance": guidance, "size": size}
            pairs = [
                (
                    timed(functools.partial(bare, pipe, case), sync),
                    timed(functools.partial(ours_render, sampler, mine, case), sync),
                )
                for _ in range(args.renders)
            ]
            bare_ms = min(p[0] for p in pairs)
            ours_ms = min(p[1] for p in pairs)
            rows.append(
                {
                    "case": name,
                    "pipeline_ms": round(bare_ms),
                    "ours_ms": round(ours_ms),
                    "ratio": round(ours_ms / bare_ms, 3),
                }
            )
    finally:
        sampler.close()
    print(f"built in {build_s:.1f} s ({args.preset}, {args.device}, {dtype_name}, {size}px)")
    print(f"{'case':<24}{'pipeline ms':>14}{'ours ms':>10}{'ratio':>8}")
    for row in rows:
        print(f"{row['case']:<24}{row['pipeline_ms']:>14}{row['ours_ms']:>10}{row['ratio']:>8}")
    result = {"preset": args.preset, "device": args.device, "build_s": build_s, "rows": rows}
    if torch.cuda.is_available():
        result["gpu"] = torch.cuda.get_device_name()
        result["peak_gb"] = round(torch.cuda.max_memory_allocated() / 2**30, 1)
    name = "gpu_qwen_image.json" if args.preset == "full" else "gpu_qwen_image_smoke.json"
    out = RESULTS.with_name(name)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    if os.environ.get("OUT"):
        shutil.copy(out, Path(os.environ["OUT"]) / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
