"""Tiny random-weight Wan 2.1 models, written into a models folder in both layouts.

    inline-core kit --family wan --out models/

The kit builds a Wan transformer, a Wan 2.1 VAE (the published layout at a tiny width), a UMT5
encoder with a byte-level tokenizer and the UniPC scheduler config, from fixed seeds, and writes:

- ComfyUI layout: `diffusion_models/wan2.1_t2v_tiny_fp32.safetensors` (the Wan repository's key
  naming), `vae/wan_2.1_vae_tiny.safetensors` (its naming too),
  `text_encoders/umt5_tiny_fp32.safetensors` and its tokenizer folder
  `text_encoders/umt5_tiny_tokenizer/`;
- diffusers layout: `diffusion_models/wan2.1_t2v_tiny_diffusers/` (`WanPipeline.save_pretrained`).

Both layouts hold the same weights, so they render the same frames. Random weights draw noise.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import torch

from inline_core.diffusion.formats import umt5, wan_vae
from inline_core.diffusion.kit import byte_tokenizer, report, save_weights, seeded
from inline_core.diffusion.libs import diffusers, quiet, transformers
from inline_core.families.wan import transformer as wan_transformer
from inline_core.families.wan.files import DEFAULT_SCHEDULER_CONFIG
from inline_core.families.wan.request import MAX_PROMPT_TOKENS

LAYOUTS = ("comfy", "diffusers")
TEXT_DIM = 32
TRANSFORMER_CONFIG: dict[str, Any] = {
    "patch_size": list(wan_transformer.PATCH),
    "num_attention_heads": 2,
    "attention_head_dim": wan_transformer.SMALL_HEAD_DIM,
    "in_channels": 16,
    "out_channels": 16,
    "text_dim": TEXT_DIM,
    "freq_dim": 256,
    "ffn_dim": 64,
    "num_layers": 2,
    "cross_attn_norm": True,
    "qk_norm": "rms_norm_across_heads",
    "eps": 1e-6,
    "rope_max_seq_len": 1024,
}
VAE_CONFIG: dict[str, Any] = {"base_dim": 8, "z_dim": wan_vae.LATENT_CHANNELS}
SEEDS = {"text_encoder": 21, "transformer": 22, "vae": 23}


@dataclass(frozen=True)
class WanKit:
    root: Path
    diffusion_file: Path | None
    vae_file: Path | None
    text_encoder_file: Path | None
    tokenizer_dir: Path | None
    diffusers_dir: Path | None


def build_tokenizer() -> Any:
    return byte_tokenizer(
        ["<pad>", "</s>", "<unk>"],
        pad_token="<pad>",
        eos_token="</s>",
        model_max_length=MAX_PROMPT_TOKENS,
    )


def umt5_config(vocab_size: int, pad_token_id: int) -> Any:
    return transformers().UMT5Config(
        vocab_size=vocab_size,
        d_model=TEXT_DIM,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        relative_attention_num_buckets=32,
        relative_attention_max_distance=umt5.MAX_DISTANCE,
        feed_forward_proj="gated-gelu",
        layer_norm_epsilon=umt5.EPS,
        pad_token_id=pad_token_id,
        decoder_start_token_id=0,
    )


def build_parts() -> dict[str, Any]:
    quiet()
    tokenizer = build_tokenizer()
    seeded(SEEDS["text_encoder"])
    config = umt5_config(len(tokenizer), int(tokenizer.pad_token_id))
    text_encoder = transformers().UMT5EncoderModel(config).eval()
    seeded(SEEDS["transformer"])
    transformer = diffusers().WanTransformer3DModel(**TRANSFORMER_CONFIG).eval()
    seeded(SEEDS["vae"])
    vae = diffusers().AutoencoderKLWan(**VAE_CONFIG).eval()
    scheduler = diffusers().UniPCMultistepScheduler.from_config(DEFAULT_SCHEDULER_CONFIG)
    return {
        "tokenizer": tokenizer,
        "text_encoder": text_encoder,
        "transformer": transformer,
        "vae": vae,
        "scheduler": scheduler,
    }


def build_kit(out: Path, layouts: Sequence[str] = LAYOUTS) -> WanKit:
    """Write the kit into the models folder `out`; returns where each piece went."""
    if unknown := set(layouts) - set(LAYOUTS):
        raise ValueError(f"unknown layouts {sorted(unknown)}; choose from {LAYOUTS}")
    parts = build_parts()
    diffusion_file = vae_file = te_file = tok_dir = diffusers_dir = None
    if "comfy" in layouts:
        diffusion_file = out / "diffusion_models" / "wan2.1_t2v_tiny_fp32.safetensors"
        sd = wan_transformer.to_original(parts["transformer"].state_dict())
        save_weights(sd, diffusion_file, torch.float32)
        vae_file = out / "vae" / "wan_2.1_vae_tiny.safetensors"
        save_weights(wan_vae.to_original(parts["vae"].state_dict()), vae_file, torch.float32)
        te_file = out / "text_encoders" / "umt5_tiny_fp32.safetensors"
        encoder_sd = dict(parts["text_encoder"].state_dict())
        encoder_sd.pop(umt5.TIED, None)  # ComfyUI's files keep the shared embedding only
        save_weights(encoder_sd, te_file, torch.float32)
        tok_dir = out / "text_encoders" / "umt5_tiny_tokenizer"
        parts["tokenizer"].save_pretrained(str(tok_dir))
    if "diffusers" in layouts:
        diffusers_dir = out / "diffusion_models" / "wan2.1_t2v_tiny_diffusers"
        diffusers().WanPipeline(**parts).save_pretrained(str(diffusers_dir))
    for category in ("diffusion_models", "vae", "text_encoders"):
        (out / category).mkdir(parents=True, exist_ok=True)
    return WanKit(out, diffusion_file, vae_file, te_file, tok_dir, diffusers_dir)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="inline-core kit --family wan",
        description="Write tiny random-weight Wan 2.1 models (they draw noise) into a folder.",
    )
    parser.add_argument("--out", type=Path, default=Path("models"), help="models folder")
    parser.add_argument(
        "--layout", choices=LAYOUTS, action="append", help="write only this layout (repeatable)"
    )
    args = parser.parse_args(argv)
    out = cast(Path, args.out)
    layouts = cast(list[str] | None, args.layout) or list(LAYOUTS)
    kit = build_kit(out, layouts)
    written = [
        kit.diffusion_file,
        kit.vae_file,
        kit.text_encoder_file,
        kit.tokenizer_dir,
        kit.diffusers_dir,
    ]
    print(report(out, written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
