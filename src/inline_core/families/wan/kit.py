"""Tiny random-weight Wan models (2.1 text-to-video and 2.2 TI2V), written into a models folder
in both layouts.

    inline-core kit --family wan --out models/

The kit builds, from fixed seeds, a UMT5 encoder with a byte-level tokenizer (shared), and for
each variant a Wan transformer, its VAE (the published layout at a tiny width: Wan 2.1's, or Wan
2.2's 48-channel residual one with the published latent statistics) and its UniPC scheduler
config, and writes:

- ComfyUI layout: `diffusion_models/wan2.1_t2v_tiny_fp32.safetensors` and
  `diffusion_models/wan2.2_ti2v_tiny_fp32.safetensors` (the Wan repository's key naming),
  `vae/wan_2.1_vae_tiny.safetensors` and `vae/wan2.2_vae_tiny.safetensors` (their naming too),
  `text_encoders/umt5_tiny_fp32.safetensors` and its tokenizer folder
  `text_encoders/umt5_tiny_tokenizer/`;
- diffusers layout: `diffusion_models/wan2.1_t2v_tiny_diffusers/` and
  `diffusion_models/wan2.2_ti2v_tiny_diffusers/` (`WanPipeline.save_pretrained`; the TI2V one with
  `expand_timesteps`, as diffusers' Wan2.2-TI2V-5B folder);
- `loras/wan2.1_t2v_tiny_lora_a*.safetensors` (one Wan 2.1 LoRA in the diffusers/PEFT, ComfyUI,
  ai-toolkit and musubi-tuner namings) and `loras/wan2.1_t2v_tiny_lora_b.safetensors` (another,
  on other layers; `kit_loras.py`).

Both layouts hold the same weights, so they render the same frames. Random weights draw noise.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import torch

from inline_core.diffusion.formats import umt5, wan22_vae, wan_vae
from inline_core.diffusion.kit import byte_tokenizer, report, save_weights, seeded
from inline_core.diffusion.libs import diffusers, quiet, transformers
from inline_core.families.wan import transformer as wan_transformer
from inline_core.families.wan.files import DEFAULT_SCHEDULER_CONFIG
from inline_core.families.wan.kit_loras import write_kit_loras
from inline_core.families.wan.request import MAX_PROMPT_TOKENS
from inline_core.families.wan.variants import TI2V

LAYOUTS = ("comfy", "diffusers")
VARIANTS = ("t2v", "ti2v")
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
SEEDS = {"text_encoder": 21, "transformer": 22, "vae": 23, "ti2v_transformer": 24, "ti2v_vae": 25}
# Wan 2.2 TI2V: the same transformer at 48 channels, and Wan 2.2's VAE (published statistics).
TI2V_TRANSFORMER_CONFIG: dict[str, Any] = {
    **TRANSFORMER_CONFIG,
    "in_channels": TI2V.latent_channels,
    "out_channels": TI2V.latent_channels,
}
TI2V_VAE_CONFIG: dict[str, Any] = {
    "base_dim": 4,
    "decoder_base_dim": 8,
    "z_dim": wan22_vae.LATENT_CHANNELS,
    "is_residual": True,
    "in_channels": 12,
    "out_channels": 12,
    "patch_size": 2,
    "scale_factor_spatial": TI2V.spatial_factor,
    "scale_factor_temporal": 4,
    "latents_mean": list(wan22_vae.LATENTS_MEAN),
    "latents_std": list(wan22_vae.LATENTS_STD),
}
TI2V_SCHEDULER_CONFIG: dict[str, Any] = {**DEFAULT_SCHEDULER_CONFIG, "flow_shift": TI2V.shift}


@dataclass(frozen=True)
class WanKit:
    root: Path
    diffusion_file: Path | None
    vae_file: Path | None
    text_encoder_file: Path | None
    tokenizer_dir: Path | None
    diffusers_dir: Path | None
    ti2v_diffusion_file: Path | None = None
    ti2v_vae_file: Path | None = None
    ti2v_diffusers_dir: Path | None = None
    loras: dict[str, Path] = field(default_factory=dict[str, Path])


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


def build_parts(variant: str = "t2v") -> dict[str, Any]:
    """The tiny stack of one variant ("t2v": Wan 2.1, "ti2v": Wan 2.2 TI2V), as diffusers' Wan
    pipeline takes its parts."""
    quiet()
    tokenizer = build_tokenizer()
    seeded(SEEDS["text_encoder"])
    config = umt5_config(len(tokenizer), int(tokenizer.pad_token_id))
    text_encoder = transformers().UMT5EncoderModel(config).eval()
    ti2v = variant == "ti2v"
    seeded(SEEDS["ti2v_transformer" if ti2v else "transformer"])
    transformer_config = TI2V_TRANSFORMER_CONFIG if ti2v else TRANSFORMER_CONFIG
    transformer = diffusers().WanTransformer3DModel(**transformer_config).eval()
    seeded(SEEDS["ti2v_vae" if ti2v else "vae"])
    vae = diffusers().AutoencoderKLWan(**(TI2V_VAE_CONFIG if ti2v else VAE_CONFIG)).eval()
    scheduler_config = TI2V_SCHEDULER_CONFIG if ti2v else DEFAULT_SCHEDULER_CONFIG
    scheduler = diffusers().UniPCMultistepScheduler.from_config(scheduler_config)
    return {
        "tokenizer": tokenizer,
        "text_encoder": text_encoder,
        "transformer": transformer,
        "vae": vae,
        "scheduler": scheduler,
    }


def build_kit(
    out: Path, layouts: Sequence[str] = LAYOUTS, variants: Sequence[str] = VARIANTS
) -> WanKit:
    """Write the kit into the models folder `out`; returns where each piece went."""
    if unknown := set(layouts) - set(LAYOUTS):
        raise ValueError(f"unknown layouts {sorted(unknown)}; choose from {LAYOUTS}")
    if unknown := set(variants) - set(VARIANTS):
        raise ValueError(f"unknown variants {sorted(unknown)}; choose from {VARIANTS}")
    written: dict[str, Path | None] = {}
    loras: dict[str, Path] = {}
    for variant in variants:
        parts = build_parts(variant)
        ti2v = variant == "ti2v"
        if not ti2v:
            loras = write_kit_loras(out, "wan2.1_t2v_tiny", parts["transformer"])
        if "comfy" in layouts:
            name = "wan2.2_ti2v_tiny_fp32" if ti2v else "wan2.1_t2v_tiny_fp32"
            diffusion_file = out / "diffusion_models" / f"{name}.safetensors"
            sd = wan_transformer.to_original(parts["transformer"].state_dict())
            save_weights(sd, diffusion_file, torch.float32)
            vae_name = "wan2.2_vae_tiny" if ti2v else "wan_2.1_vae_tiny"
            vae_file = out / "vae" / f"{vae_name}.safetensors"
            to_original = wan22_vae.to_original if ti2v else wan_vae.to_original
            save_weights(to_original(parts["vae"].state_dict()), vae_file, torch.float32)
            written[f"{variant}_diffusion"], written[f"{variant}_vae"] = diffusion_file, vae_file
            written.update(_write_text_encoder(out, parts))
        if "diffusers" in layouts:
            name = "wan2.2_ti2v_tiny_diffusers" if ti2v else "wan2.1_t2v_tiny_diffusers"
            folder = out / "diffusion_models" / name
            diffusers().WanPipeline(**parts, expand_timesteps=ti2v).save_pretrained(str(folder))
            written[f"{variant}_diffusers"] = folder
    for category in ("diffusion_models", "vae", "text_encoders", "loras"):
        (out / category).mkdir(parents=True, exist_ok=True)
    return WanKit(
        out,
        diffusion_file=written.get("t2v_diffusion"),
        vae_file=written.get("t2v_vae"),
        text_encoder_file=written.get("text_encoder"),
        tokenizer_dir=written.get("tokenizer"),
        diffusers_dir=written.get("t2v_diffusers"),
        ti2v_diffusion_file=written.get("ti2v_diffusion"),
        ti2v_vae_file=written.get("ti2v_vae"),
        ti2v_diffusers_dir=written.get("ti2v_diffusers"),
        loras=loras,
    )


def _write_text_encoder(out: Path, parts: dict[str, Any]) -> dict[str, Path]:
    """The shared UMT5 and its tokenizer, ComfyUI-style (every variant's is the same)."""
    te_file = out / "text_encoders" / "umt5_tiny_fp32.safetensors"
    encoder_sd = dict(parts["text_encoder"].state_dict())
    encoder_sd.pop(umt5.TIED, None)  # ComfyUI's files keep the shared embedding only
    save_weights(encoder_sd, te_file, torch.float32)
    tok_dir = out / "text_encoders" / "umt5_tiny_tokenizer"
    parts["tokenizer"].save_pretrained(str(tok_dir))
    return {"text_encoder": te_file, "tokenizer": tok_dir}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="inline-core kit --family wan",
        description="Write tiny random-weight Wan models (they draw noise) into a folder.",
    )
    parser.add_argument("--out", type=Path, default=Path("models"), help="models folder")
    parser.add_argument(
        "--layout", choices=LAYOUTS, action="append", help="write only this layout (repeatable)"
    )
    parser.add_argument(
        "--variant",
        choices=VARIANTS,
        action="append",
        help="write only this variant (t2v: Wan 2.1, ti2v: Wan 2.2 TI2V; repeatable)",
    )
    args = parser.parse_args(argv)
    out = cast(Path, args.out)
    layouts = cast(list[str] | None, args.layout) or list(LAYOUTS)
    variants = cast(list[str] | None, args.variant) or list(VARIANTS)
    kit = build_kit(out, layouts, variants)
    written = [
        kit.diffusion_file,
        kit.vae_file,
        kit.ti2v_diffusion_file,
        kit.ti2v_vae_file,
        kit.text_encoder_file,
        kit.tokenizer_dir,
        kit.diffusers_dir,
        kit.ti2v_diffusers_dir,
        *kit.loras.values(),
    ]
    print(report(out, written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
