"""Real-size SDXL on a CPU: the server's peak memory over renders of Stability's base checkpoint.

    .venv/bin/python bench/sdxl_real_size_cpu.py [--renders 2] [--size 64] [--steps 2]
        [--models DIR] [--keep] [--dtype auto]

Builds `checkpoints/sd_xl_base_1.0.safetensors` at the published shapes in the original
Stability naming, float16 as Stability ships it: the UNet (2.6B parameters), CLIP-L, OpenCLIP-G
with its projection, and the VAE (6.9 GB), with the kit's byte-level CLIP tokenizer beside it.
The file is sparse (`real_size.write_sparse_safetensors`): a real header, its data
a hole of zeros, so it is written in seconds and every page the server maps is a real page all
the same.

Then a real server (uvicorn, the CPU profile; INLINE_DTYPE=--dtype) renders `stability/sdxl`
--renders times with new seeds (the first loads the model), guidance on (two CFG rows a step),
polled from /proc (`real_size.RssPeaks`): peak anonymous RSS (copies, activations) and
file-backed RSS (mapped weights), the pages read from disk after the first render, and health's
residency counters (reloads must stay 0) and kept weights. Prints a table; writes
bench/results/sdxl_real_size_cpu.json.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent))

from real_size import (  # noqa: E402
    Row,
    bench_parser,
    run_memory_bench,
    same_dtype,
    write_sparse_safetensors,
)

from tests.server.server_support import prompt_graph  # noqa: E402

CHECKPOINT = "sd_xl_base_1.0.safetensors"
PROMPT = "a lighthouse on a cliff at dusk, dramatic clouds"
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
        write_sparse_safetensors(
            path, same_dtype({k: tuple(v.shape) for k, v in state.items()}, "F16")
        )
    return float(path.stat().st_size)


def graph_for(size: int, steps: int) -> Callable[[int], dict[str, Any]]:
    def graph(seed: int) -> dict[str, Any]:
        params: dict[str, Any] = {"model": CHECKPOINT, "width": size, "height": size}
        params |= {"steps": steps, "guidance": 5.0, "seed": seed}
        return prompt_graph("stability/sdxl", "s", params, PROMPT)

    return graph


def built_set(models: Path) -> tuple[str, Any, list[Row]]:
    size_bytes = build_set(models)
    return "fileBytes", size_bytes, [("checkpoint GB (float16)", round(size_bytes / 1e9, 2))]


def main() -> int:
    args = bench_parser(
        "real-size SDXL's memory on a CPU", renders=2, size=64, steps=2
    ).parse_args()
    return run_memory_bench(
        args,
        stem="sdxl_real_size_cpu",
        build=built_set,
        built_row="file built in s",
        graph=graph_for(int(cast(int, args.size)), int(cast(int, args.steps))),
        target="s",
        reloaded="the model",
    )


if __name__ == "__main__":
    raise SystemExit(main())
