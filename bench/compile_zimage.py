"""Compiled blocks against eager: the Z-Image transformer's forward (what a seed-only render
repeats every step) and its VAE's decode, side by side in one process, and the first compiled
call's cost with inductor's cache cold and kept.

    .venv/bin/python bench/compile_zimage.py [--sizes tiny,mid] [--px 512] [--forwards 5]
    .venv/bin/python bench/compile_zimage.py --sizes real@64,real@256,vae-real@256 --no-restart
    .venv/bin/python bench/compile_zimage.py --sizes wan-tiny@64,wan-real@64 --dtype bfloat16
    .venv/bin/python bench/compile_zimage.py --device cuda --dtype bfloat16 --px 1024 \
        --sizes mid,real,vae-real  # one GPU at 1024 px

Sizes (random weights; `size@px` gives one its own image size): `tiny` (dim 64), `mid` (dim 768,
10 layers, about 110M parameters), `real` (the real-size set's transformer of
`bench/real_size_cpu.py`: full width, dim 3840, one main layer and two refiner layers each, 0.9B
parameters), `vae-tiny` and `vae-real` (the tiny and the full FLUX autoencoder's decode, its
decoder blocks compiled), `wan-tiny` (the tiny kit's Wan transformer) and `wan-real` (Wan 2.1
T2V 1.3B's transformer as published: dim 1536, 30 blocks; a 5-frame video at `px`, the prompt
padded to 512 tokens as Wan's pipeline pads it). For each, two child processes run one after
another on one cache folder: the first finds it empty (cold: dynamo traces and inductor compiles),
the second finds it kept (a restart: dynamo traces again, inductor's code comes from the cache;
`--no-restart` skips it). Each child holds one model: it compiles the blocks (`diffusion/compile`),
times the first compiled call, then `--forwards` calls each way, eager
(`torch.compiler.set_stance("force_eager")`, the same weights) and compiled alternating so both
see the same load, and checks the outputs agree; torch's attention kernels are tried in the
device policy's order, as in the server. Prints medians, ratios and the load average;
writes bench/results/compile_zimage.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast

OUT = Path(__file__).parent / "results" / "compile_zimage.json"


def transformer_call(size: str, device: Any, dtype: Any, px: int) -> tuple[Any, Any, int]:
    """The transformer of `size` and one forward of it at `px` (a 77-token prompt)."""
    import torch

    from inline_core.diffusion.libs import diffusers, manual_seed
    from inline_core.families.zimage.kit import build_transformer

    if size == "real":
        from real_size_cpu import TRANSFORMER  # the real-size set's transformer

        manual_seed(0)
        model = diffusers().ZImageTransformer2DModel(**TRANSFORMER).eval()
    else:
        model = build_transformer(size)
    model = model.to(device, dtype)
    side = px // 8  # latent pixels (the VAE's factor 8), patched 2x2 into tokens
    generator = torch.Generator().manual_seed(0)
    latents = [torch.randn(16, 1, side, side, generator=generator).to(device, dtype)]
    width = int(model.config.cap_feat_dim)
    prompt = [torch.randn(77, width, generator=generator).to(device, dtype)]
    t = torch.full((1,), 0.5, device=device, dtype=dtype)

    def call() -> Any:
        return torch.stack(model(latents, t, prompt, return_dict=False)[0])

    return model, call, (side // 2) ** 2


# Wan 2.1 T2V 1.3B's transformer (its published config).
WAN_REAL: dict[str, Any] = {
    "patch_size": [1, 2, 2],
    "num_attention_heads": 12,
    "attention_head_dim": 128,
    "in_channels": 16,
    "out_channels": 16,
    "text_dim": 4096,
    "freq_dim": 256,
    "ffn_dim": 8960,
    "num_layers": 30,
    "cross_attn_norm": True,
    "qk_norm": "rms_norm_across_heads",
    "eps": 1e-6,
    "rope_max_seq_len": 1024,
}
WAN_FRAMES = 5  # a 5-frame video: 2 latent frames (Wan's VAE: 4x in time, 8x in space)


def wan_call(size: str, device: Any, dtype: Any, px: int) -> tuple[Any, Any, int]:
    """Wan's transformer (`wan-tiny`, `wan-real`) and one step of a `px` 5-frame video."""
    import torch

    from inline_core.diffusion.libs import diffusers, manual_seed
    from inline_core.families.wan.kit import TRANSFORMER_CONFIG
    from inline_core.families.wan.request import MAX_PROMPT_TOKENS

    manual_seed(0)
    config = WAN_REAL if size == "wan-real" else TRANSFORMER_CONFIG
    model = diffusers().WanTransformer3DModel(**config).eval().to(device, dtype)
    side, frames = px // 8, (WAN_FRAMES - 1) // 4 + 1
    generator = torch.Generator().manual_seed(0)
    latents = torch.randn(1, 16, frames, side, side, generator=generator).to(device, dtype)
    text = int(config["text_dim"])
    prompt = torch.randn(1, MAX_PROMPT_TOKENS, text, generator=generator).to(device, dtype)
    t = torch.full((1,), 500.0, device=device, dtype=dtype)

    def call() -> Any:
        return model(latents, t, prompt, return_dict=False)[0]

    return model, call, frames * (side // 2) ** 2


def vae_call(size: str, device: Any, dtype: Any, px: int) -> tuple[Any, Any, int]:
    """The FLUX autoencoder (`vae-tiny`, `vae-real`) and one decode of a `px` image's latents."""
    import torch

    from inline_core.diffusion.libs import diffusers, manual_seed
    from inline_core.families.zimage.kit import build_vae

    if size == "vae-real":
        from real_size_cpu import FLUX_VAE  # the real-size set's autoencoder

        manual_seed(0)
        model = diffusers().AutoencoderKL(**FLUX_VAE).eval()
    else:
        model = build_vae()
    model = model.to(device, dtype)
    side = px // 8
    generator = torch.Generator().manual_seed(0)
    latents = torch.randn(1, 16, side, side, generator=generator).to(device, dtype)

    def call() -> Any:
        return model.decode(latents, return_dict=False)[0]

    return model, call, side * side


def child(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from inline_core.device.attention import attention_choice
    from inline_core.device.compile import CompileChoice
    from inline_core.device.detect import detect_hardware
    from inline_core.diffusion.compile.attention import use_attention
    from inline_core.diffusion.compile.blocks import decoder_blocks, repeated_blocks
    from inline_core.diffusion.compile.progress import BOARD
    from inline_core.diffusion.compile.regional import compile_blocks

    size, px, forwards, profile = args.child, args.px, args.forwards, args.profile
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    sdpa = use_attention(attention_choice(detect_hardware(), device.type))  # as the server does
    is_vae = size.startswith("vae-")
    make = vae_call if is_vae else wan_call if size.startswith("wan-") else transformer_call
    model, call, cells = make(size, device, dtype, px)

    def forward(compiled: bool) -> tuple[float, torch.Tensor]:
        with (
            torch.inference_mode(),
            torch.compiler.set_stance("default" if compiled else "force_eager"),
        ):
            began = time.perf_counter()
            out = call()
            if device.type == "cuda":
                torch.cuda.synchronize()
            return time.perf_counter() - began, out.float()

    find = decoder_blocks if is_vae else repeated_blocks
    blocks = compile_blocks(model, size, CompileChoice(True, "bench"), find)
    forward(False)  # first-call allocations out of the way
    first, got = forward(True)
    eager_s: list[float] = []
    compiled_s: list[float] = []
    expected = got
    for _ in range(forwards):
        seconds, expected = forward(False)
        eager_s.append(seconds)
        seconds, got = forward(True)
        compiled_s.append(seconds)
    row: dict[str, Any] = {
        "size": size,
        "device": args.device,
        "dtype": args.dtype,
        "px": px,
        "tokens": cells,  # image tokens (the transformer) or latent cells (the VAE)
        "blocks": blocks,
        "sdpa": sdpa,
        "eagerMs": round(statistics.median(eager_s) * 1000, 1),
        "compiledMs": round(statistics.median(compiled_s) * 1000, 1),
        "firstCompiledS": round(first, 1),
        "maxAbsDiff": float((got - expected).abs().max()),
        "compile": BOARD.to_json()["blocks"],
    }
    if profile:
        row["profile"] = {
            "eager": top_ops(lambda: forward(False)),
            "compiled": top_ops(lambda: forward(True)),
        }
    return row


def top_ops(call: Any, rows: int = 12, all_threads: bool = False) -> list[dict[str, Any]]:
    """Where one forward's time goes: torch.profiler's top operators by self CPU time (on every
    thread with `all_threads`: a render computes on the step loop's)."""
    import torch.profiler as profiler
    from torch.profiler import ProfilerActivity, profile

    # torch exports the class under its private name; `profile_all_threads` is its only switch.
    config = cast(Any, profiler)._ExperimentalConfig(profile_all_threads=all_threads)
    with profile(activities=[ProfilerActivity.CPU], experimental_config=config) as prof:
        call()
    averages = cast(list[Any], list(prof.key_averages()))
    events = sorted(averages, key=lambda e: float(e.self_cpu_time_total), reverse=True)
    total = sum(float(e.self_cpu_time_total) for e in events) or 1.0
    return [
        {
            "op": str(e.key),
            "selfMs": round(float(e.self_cpu_time_total) / 1000, 1),
            "share": round(float(e.self_cpu_time_total) / total, 3),
            "calls": int(e.count),
        }
        for e in events[:rows]
    ]


def run_child(
    size: str, px: int, args: argparse.Namespace, cache: str, profile: bool
) -> dict[str, Any]:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
    command = [sys.executable, __file__, "--child", size, "--px", str(px)]
    command += ["--device", args.device, "--dtype", args.dtype]
    command += ["--forwards", str(args.forwards)] + (["--profile"] if profile else [])
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{size}: the child failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="tiny,mid")
    parser.add_argument("--px", type=int, default=512)
    parser.add_argument("--forwards", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="profile one forward each way")
    parser.add_argument(
        "--restart",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="a second child on the kept cache (a restart's first call)",
    )
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--dtype", default="float32", help="float32, bfloat16 or float16")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args)))
        return 0
    rows: list[dict[str, Any]] = []
    print(f"{args.device} {args.dtype}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    header = f"{'size':8s} {'px':>5s} {'tokens':>6s} {'eager ms':>9s} {'compiled ms':>11s}"
    print(
        header + f" {'speed-up':>8s} {'first cold s':>12s} {'first kept s':>12s} {'max diff':>9s}"
    )
    for item in args.sizes.split(","):
        size, _, at = item.partition("@")  # `real@64`: this size at 64 px
        px = int(at or args.px)
        with tempfile.TemporaryDirectory(prefix="inductor-") as cache:
            cold = run_child(size, px, args, cache, profile=args.profile and not args.restart)
            kept = run_child(size, px, args, cache, args.profile) if args.restart else cold
        row = {
            **kept,
            "firstColdS": cold["firstCompiledS"],
            "firstKeptS": kept["firstCompiledS"] if args.restart else None,
            "speedup": round(kept["eagerMs"] / kept["compiledMs"], 2),
            "coldRun": {k: cold[k] for k in ("eagerMs", "compiledMs")},
            "loadAverage": round(os.getloadavg()[0], 2),
        }
        rows.append(row)
        print(
            f"{size:8s} {px:5d} {row['tokens']:6d} {row['eagerMs']:9.1f} {row['compiledMs']:11.1f}"
            f" {row['speedup']:7.2f}x {row['firstColdS']:12.1f} {row['firstKeptS'] or 0:12.1f}"
            f" {row['maxAbsDiff']:9.2e}"
        )
    print(f"load {os.getloadavg()[0]:.1f} at the end")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    out = OUT if args.device == "cpu" else OUT.with_name(f"compile_zimage_{args.device}.json")
    out.write_text(json.dumps({"cpus": os.cpu_count(), "rows": rows}, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
