"""Real-size Qwen-Image (the 20B transformer) on a CPU: the server's peak memory over renders.

    .venv/bin/python bench/qwen_image_real_size_cpu.py [--renders 2] [--size 64] [--steps 1]
        [--models DIR] [--keep] [--dtype auto]

Builds the set ComfyUI's Qwen-Image template loads, at the published shapes, in ComfyUI's layout:
- `diffusion_models/qwen_image_fp8_e4m3fn.safetensors`: the transformer, 60 blocks of width 3072
  (24 heads of 128), text width 3584: 20.4B parameters, its layers' weights float8_e4m3fn, the
  rest bfloat16 (20.4 GB);
- `text_encoders/qwen_2.5_vl_7b_fp8_scaled.safetensors`: Qwen2.5-VL-7B (28 layers of 3584 and
  its 32-block vision tower), ComfyUI's fp8_scaled layout: each linear layer's weight fp8 with its
  `scale_weight` (9 GB), and the kit's byte-level tokenizer and image processor beside it;
- `vae/qwen_image_vae.safetensors`: the Qwen-Image VAE (base width 96), bfloat16.
The files are sparse (`real_size.write_sparse_safetensors`): a real safetensors header, its data
region left unwritten (zeros). They
take next to no disk and are written in seconds; every page the server maps is a real page of the
page cache all the same, so the memory is what the real files' would be (zeros compute as slowly
as real weights; the image is flat). The transformer alone is as large as this machine's RAM.

Then a real server (uvicorn, the CPU profile, the dtype its policy picks; INLINE_DTYPE=--dtype)
renders `alibaba/qwen-image` --renders times with new seeds (the first loads the models), at
--size pixels, --steps steps, guidance off; polled from /proc (`real_size.RssPeaks`): the
peak anonymous RSS (what the memory budget holds: copies, activations) and file-backed RSS (the
mapped weights, evictable pages), the pages read from disk; health's residency counters (loads,
reloads: must stay 0 after the first render) and its kept weights. Prints a table; writes
bench/results/qwen_image_real_size_cpu.json.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent))

from real_size import (  # noqa: E402
    bench_parser,
    fp8_layers,
    qwen_image_vae_tensors,
    run_memory_bench,
    write_sparse_safetensors,
)

from tests.server.server_support import prompt_graph  # noqa: E402

MODEL = "qwen_image_fp8_e4m3fn.safetensors"
ENCODER = "qwen_2.5_vl_7b_fp8_scaled.safetensors"
VAE = "qwen_image_vae.safetensors"
PROMPT = "a red paper lantern over a quiet street at night"
TRANSFORMER: dict[str, Any] = {
    "patch_size": 2,
    "in_channels": 64,
    "out_channels": 16,
    "num_layers": 60,
    "attention_head_dim": 128,
    "num_attention_heads": 24,
    "joint_attention_dim": 3584,
    "guidance_embeds": False,
    "axes_dims_rope": (16, 56, 56),
}
QWEN25_VL_7B_TEXT: dict[str, Any] = {
    "vocab_size": 152064,
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "rms_norm_eps": 1e-6,
    "max_position_embeddings": 128_000,
    "tie_word_embeddings": False,
}
QWEN25_VL_7B_VISION: dict[str, Any] = {
    "depth": 32,
    "hidden_size": 1280,
    "intermediate_size": 3420,
    "num_heads": 16,
    "in_channels": 3,
    "patch_size": 14,
    "temporal_patch_size": 2,
    "spatial_merge_size": 2,
    "window_size": 112,
    "out_hidden_size": 3584,
    "fullatt_block_indexes": [7, 15, 23, 31],
}

# -- the set ---------------------------------------------------------------------------------------


def build_set(models: Path) -> dict[str, float]:
    """The three files and the tokenizer folder (skipping files present); each file's bytes."""
    import torch

    from inline_core.diffusion.libs import diffusers, transformers
    from inline_core.families.qwen_image import kit
    from inline_core.families.qwen_image.files import TOKENIZER_DIR
    from inline_core.families.qwen_image.text_encoder import mrope_section

    tokenizer = kit.build_tokenizer()
    kit.save_processor(
        tokenizer, kit.build_image_processor(), models / "text_encoders" / TOKENIZER_DIR
    )
    dit = models / "diffusion_models" / MODEL
    if not dit.exists():
        with torch.device("meta"):
            model = diffusers().QwenImageTransformer2DModel(**TRANSFORMER)
        shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
        write_sparse_safetensors(dit, fp8_layers(shapes, scaled=False))
    encoder = models / "text_encoders" / ENCODER
    if not encoder.exists():
        text = {
            **QWEN25_VL_7B_TEXT,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 1_000_000.0,
                "mrope_section": mrope_section(128),
            },
        }
        ids = {
            name: tokenizer.convert_tokens_to_ids(token)
            for name, token in (
                ("image_token_id", "<|image_pad|>"),
                ("video_token_id", "<|video_pad|>"),
                ("vision_start_token_id", "<|vision_start|>"),
                ("vision_end_token_id", "<|vision_end|>"),
            )
        }
        lib = transformers()
        config = lib.Qwen2_5_VLConfig(text_config=text, vision_config=QWEN25_VL_7B_VISION, **ids)
        with torch.device("meta"):
            model = lib.Qwen2_5_VLForConditionalGeneration(config)
        named = kit.original_text_encoder(dict(model.state_dict()))
        shapes = {k: tuple(v.shape) for k, v in named.items() if not k.startswith("lm_head.")}
        write_sparse_safetensors(encoder, fp8_layers(shapes, scaled=True))
    vae = models / "vae" / VAE
    if not vae.exists():
        write_sparse_safetensors(vae, qwen_image_vae_tensors())
    return {
        part: float(path.stat().st_size)
        for part, path in (("transformer", dit), ("text_encoder", encoder), ("vae", vae))
    }


# -- the renders -----------------------------------------------------------------------------------


def graph_for(size: int, steps: int) -> Callable[[int], dict[str, Any]]:
    def graph(seed: int) -> dict[str, Any]:
        params: dict[str, Any] = {"model": MODEL, "width": size, "height": size}
        params.update({"steps": steps, "guidance": 1.0, "seed": seed})
        return prompt_graph("alibaba/qwen-image", "q", params, PROMPT)

    return graph


def built_set(models: Path) -> tuple[str, Any, list[tuple[str, object]]]:
    built = build_set(models)
    return "filesBytes", built, [("files (GB): transformer / text encoder / VAE", _sizes(built))]


def main() -> int:
    parser = bench_parser("real-size Qwen-Image's memory on a CPU", renders=2, size=64, steps=1)
    args = parser.parse_args()
    return run_memory_bench(
        args,
        stem="qwen_image_real_size_cpu",
        build=built_set,
        built_row="files built in s",
        graph=graph_for(int(cast(int, args.size)), int(cast(int, args.steps))),
        target="q",
        reloaded="a model",
    )


def _sizes(built: dict[str, float]) -> str:
    return " / ".join(f"{built[p] / 1e9:.2f}" for p in ("transformer", "text_encoder", "vae"))


if __name__ == "__main__":
    raise SystemExit(main())
