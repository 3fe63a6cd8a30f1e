"""Real-size SDXL on a CPU: the server's peak memory over renders of Stability's base checkpoint.

    .venv/bin/python bench/sdxl_real_size_cpu.py [--renders 2] [--size 64] [--steps 2]
        [--models DIR] [--keep] [--dtype auto]

Builds `checkpoints/sd_xl_base_1.0.safetensors` at the published shapes in the original
Stability naming, float16 as Stability ships it: the UNet (2.6B parameters), CLIP-L, OpenCLIP-G
with its projection, and the VAE (6.9 GB), with the kit's byte-level CLIP tokenizer beside it.
The file is sparse (`qwen_image_real_size_cpu.write_sparse_safetensors`): a real header, its data
a hole of zeros, so it is written in seconds and every page the server maps is a real page all
the same.

Then a real server (uvicorn, the CPU profile; INLINE_DTYPE=--dtype) renders `stability/sdxl`
--renders times with new seeds (the first loads the model), guidance on (two CFG rows a step),
polled from /proc (`real_size_cpu.RssPeaks`): peak anonymous RSS (copies, activations) and
file-backed RSS (mapped weights), the pages read from disk after the first render, and health's
residency counters (reloads must stay 0) and kept weights. Prints a table; writes
bench/results/sdxl_real_size_cpu.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT), str(Path(__file__).resolve().parent)]
RESULTS = ROOT / "bench" / "results" / "sdxl_real_size_cpu.json"

from qwen_image_real_size_cpu import (  # noqa: E402
    measure_renders,
    memory_rows,
    write_sparse_safetensors,
)

from tests.server.server_support import prompt_graph  # noqa: E402

CHECKPOINT = "sd_xl_base_1.0.safetensors"
PROMPT = "a lighthouse on a cliff at dusk, dramatic clouds"
GIB = 1024**3
CLIP_VOCAB, CLIP_POSITIONS = 49408, 77
# SDXL base's UNet, as its diffusers repo configures it.
UNET: dict[str, Any] = {
    "sample_size": 128,
    "in_channels": 4,
    "out_channels": 4,
    "down_block_types": ["DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"],
    "up_block_types": ["CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"],
    "block_out_channels": [320, 640, 1280],
    "layers_per_block": 2,
    "transformer_layers_per_block": [1, 2, 10],
    "attention_head_dim": [5, 10, 20],
    "use_linear_projection": True,
    "cross_attention_dim": 2048,
    "addition_embed_type": "text_time",
    "addition_time_embed_dim": 256,
    "projection_class_embeddings_input_dim": 2816,
}
VAE: dict[str, Any] = {
    "in_channels": 3,
    "out_channels": 3,
    "down_block_types": ["DownEncoderBlock2D"] * 4,
    "up_block_types": ["UpDecoderBlock2D"] * 4,
    "block_out_channels": [128, 256, 512, 512],
    "layers_per_block": 2,
    "latent_channels": 4,
    "norm_num_groups": 32,
    "sample_size": 1024,
    "scaling_factor": 0.13025,
}
# CLIP-L (width, layers, activation) and OpenCLIP-G's text tower with its 1280 projection.
CLIP_L = (768, 12, "quick_gelu")
CLIP_G = (1280, 32, "gelu")


def _clip_config(width: int, layers: int, activation: str, tokenizer: Any) -> Any:
    from inline_core.diffusion.libs import transformers

    return transformers().CLIPTextConfig(
        vocab_size=CLIP_VOCAB,
        hidden_size=width,
        intermediate_size=width * 4,
        num_hidden_layers=layers,
        num_attention_heads=width // 64,
        max_position_embeddings=CLIP_POSITIONS,
        projection_dim=width,
        hidden_act=activation,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )


def build_set(models: Path) -> float:
    """The checkpoint (skipped when present) and the tokenizer folder; the file's bytes."""
    import torch

    from inline_core.diffusion.libs import diffusers, transformers
    from inline_core.families.sdxl.kit import TOKENIZER_FOLDER, build_tokenizer, checkpoint_state

    tokenizer = build_tokenizer(models / "text_encoders" / TOKENIZER_FOLDER)
    path = models / "checkpoints" / CHECKPOINT
    if not path.exists():
        lib = transformers()
        with torch.device("meta"):
            unet = diffusers().UNet2DConditionModel(**UNET)
            vae = diffusers().AutoencoderKL(**VAE)
            first = lib.CLIPTextModel(_clip_config(*CLIP_L, tokenizer))
            second = lib.CLIPTextModelWithProjection(_clip_config(*CLIP_G, tokenizer))
        state = checkpoint_state(unet, vae, first, second)
        write_sparse_safetensors(path, {k: (tuple(v.shape), "F16") for k, v in state.items()})
    return float(path.stat().st_size)


def graph_for(size: int, steps: int) -> Callable[[int], dict[str, Any]]:
    def graph(seed: int) -> dict[str, Any]:
        params: dict[str, Any] = {"model": CHECKPOINT, "width": size, "height": size}
        params |= {"steps": steps, "guidance": 5.0, "seed": seed}
        return prompt_graph("stability/sdxl", "s", params, PROMPT)

    return graph


def main() -> int:
    parser = argparse.ArgumentParser(description="real-size SDXL's memory on a CPU")
    parser.add_argument("--renders", type=int, default=2)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--models", type=Path, default=None, help="build into / reuse this folder")
    parser.add_argument("--keep", action="store_true", help="keep the built set")
    parser.add_argument("--dtype", default="auto", help="INLINE_DTYPE for the server")
    args = parser.parse_args()
    given = cast(Path | None, args.models)
    models = given or Path(tempfile.mkdtemp(prefix="sdxl-real-size-"))
    start_load = os.getloadavg()
    try:
        started = time.perf_counter()
        size_bytes = build_set(models)
        build_s = time.perf_counter() - started
        env = {"INLINE_DTYPE": str(args.dtype)}
        graph = graph_for(int(args.size), int(args.steps))
        result = measure_renders(models, int(args.renders), env, graph, "s")
    finally:
        if given is None and not args.keep:
            shutil.rmtree(models, ignore_errors=True)
    rows: list[tuple[str, object]] = [
        ("checkpoint GB (float16)", round(size_bytes / 1e9, 2)),
        ("file built in s", round(build_s, 1)),
        *memory_rows(result),
    ]
    print(f"{'measure':46} value")
    for name, value in rows:
        print(f"{name:46} {value}")
    machine = {
        "cpus": os.cpu_count(),
        "memTotalGiB": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GIB, 1),
        "loadAverageStart": start_load,
        "loadAverageEnd": os.getloadavg(),
    }
    settings = {"size": args.size, "steps": args.steps, "renders": args.renders}
    out = {"machine": machine, "settings": settings, "fileBytes": size_bytes, "server": result}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {RESULTS}")
    if result["steadyReloads"]:
        print("FAIL: a render after the first reloaded the model", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
