"""Tiny random-weight Chroma models, written into a models folder as diffusers folders.

    inline-core kit --family chroma --out models/

A pipeline folder (`diffusion_models/chroma_tiny/`), and its T5 and VAE again as folders of their
own (`text_encoders/chroma_tiny_t5/`, `vae/chroma_tiny_vae/`) for the low-level loaders. The VAE
is the FLUX VAE layout Z-Image's kit writes too, so the two families can share one.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from inline_core.diffusion.kit import TINY_FLUX_VAE_CONFIG, byte_tokenizer, report, seeded
from inline_core.diffusion.libs import diffusers, quiet, transformers
from tiny_chroma.build import DEFAULT_SCHEDULER_CONFIG

TRANSFORMER_CONFIG: dict[str, Any] = {
    "patch_size": 1,
    "in_channels": 64,
    "num_layers": 1,
    "num_single_layers": 1,
    "attention_head_dim": 16,
    "num_attention_heads": 2,
    "joint_attention_dim": 32,
    "axes_dims_rope": (4, 6, 6),
    "approximator_num_channels": 64,
    "approximator_hidden_dim": 32,
    "approximator_layers": 1,
}
VAE_CONFIG = TINY_FLUX_VAE_CONFIG
SEEDS = {"text_encoder": 11, "transformer": 12, "vae": 13}


@dataclass(frozen=True)
class ChromaKit:
    root: Path
    pipeline_dir: Path
    text_encoder_dir: Path
    vae_dir: Path


def build_tokenizer() -> Any:
    return byte_tokenizer(["<pad>", "</s>"], pad_token="<pad>", eos_token="</s>")


def build_parts() -> dict[str, Any]:
    quiet()
    tokenizer = build_tokenizer()
    seeded(SEEDS["text_encoder"])
    t5_config = transformers().T5Config(
        vocab_size=len(tokenizer),
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        feed_forward_proj="gated-gelu",
        decoder_start_token_id=0,
        pad_token_id=tokenizer.pad_token_id,
    )
    text_encoder = transformers().T5EncoderModel(t5_config).eval()
    seeded(SEEDS["transformer"])
    transformer = diffusers().ChromaTransformer2DModel(**TRANSFORMER_CONFIG).eval()
    seeded(SEEDS["vae"])
    vae = diffusers().AutoencoderKL(**VAE_CONFIG).eval()
    scheduler = diffusers().FlowMatchEulerDiscreteScheduler.from_config(DEFAULT_SCHEDULER_CONFIG)
    return {
        "tokenizer": tokenizer,
        "text_encoder": text_encoder,
        "transformer": transformer,
        "vae": vae,
        "scheduler": scheduler,
    }


def build_kit(out: Path) -> ChromaKit:
    parts = build_parts()
    pipeline_dir = out / "diffusion_models" / "chroma_tiny"
    diffusers().ChromaPipeline(**parts).save_pretrained(str(pipeline_dir))
    t5_dir = out / "text_encoders" / "chroma_tiny_t5"
    parts["text_encoder"].save_pretrained(str(t5_dir))
    parts["tokenizer"].save_pretrained(str(t5_dir))
    vae_dir = out / "vae" / "chroma_tiny_vae"
    parts["vae"].save_pretrained(str(vae_dir))
    return ChromaKit(out, pipeline_dir, t5_dir, vae_dir)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="inline-core kit --family chroma",
        description="Write tiny random-weight Chroma models (they draw noise) into a folder.",
    )
    parser.add_argument("--out", type=Path, default=Path("models"), help="models folder")
    args = parser.parse_args(argv)
    out = cast(Path, args.out)
    kit = build_kit(out)
    print(report(out, [kit.pipeline_dir, kit.text_encoder_dir, kit.vae_dir]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
