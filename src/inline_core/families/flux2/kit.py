"""Tiny random-weight FLUX.2 klein models, written into a models folder in both layouts
(`kit_command.py` writes them with `kit_dev.py`'s tiny FLUX.2 dev beside them).

The kit builds a klein transformer, FLUX.2's VAE (32 latent channels, a batch norm with random
running statistics) and a Qwen3 text encoder (four layers: klein reads three of them) with a
byte-level BPE tokenizer, from fixed seeds, and writes:

- ComfyUI layout: `diffusion_models/flux2_klein_tiny.safetensors` (BFL's naming, fused q/k/v;
  distilled) and `diffusion_models/flux2_klein_base_tiny.safetensors` (the same weights, named
  as a base model), `vae/flux2_tiny_vae.safetensors` (ComfyUI's `flux2-vae` naming) and
  `text_encoders/flux2_tiny_qwen3/` (an HF folder with its tokenizer; its width fits Z-Image's
  tiny transformer too, so one file can serve both families);
- diffusers layout: `diffusion_models/flux2_klein_tiny_diffusers/` (`Flux2KleinPipeline`,
  distilled);
- `loras/flux2_klein_tiny_lora_a.safetensors` (attention, diffusers/PEFT naming) and
  `loras/flux2_klein_tiny_lora_b*.safetensors` (feed-forwards, in PEFT and BFL's naming).

Both layouts hold the same weights, so they render the same pixels. Random weights draw noise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from inline_core.diffusion.formats import flux2_vae
from inline_core.diffusion.kit import save_weights, seeded
from inline_core.diffusion.kit_qwen3 import qwen3_tokenizer, tiny_qwen3_config
from inline_core.diffusion.libs import diffusers, quiet, transformers
from inline_core.families.flux2.files import DEFAULT_SCHEDULER_CONFIG
from inline_core.families.flux2.kit_loras import write_kit_loras
from inline_core.families.flux2.transformer import to_original

LAYOUTS = ("comfy", "diffusers")
TEXT_WIDTH = 32  # the Qwen3's hidden size (Z-Image's tiny captions are as wide)
TEXT_LAYERS = 4  # klein reads layers 1, 2 and 3 of four (9, 18, 27 of 36)
TRANSFORMER_CONFIG: dict[str, Any] = {
    "patch_size": 1,
    "in_channels": flux2_vae.LATENT_CHANNELS * 4,
    "num_layers": 1,
    "num_single_layers": 2,  # a front block and a middle one, for the step cache
    "attention_head_dim": 16,
    "num_attention_heads": 2,
    "joint_attention_dim": TEXT_WIDTH * 3,
    "timestep_guidance_channels": 32,
    "mlp_ratio": 3.0,
    "axes_dims_rope": (4, 4, 4, 4),
    "rope_theta": 2000,
    "guidance_embeds": False,
}
VAE_CONFIG: dict[str, Any] = {
    "in_channels": 3,
    "out_channels": 3,
    "down_block_types": ["DownEncoderBlock2D"] * 4,
    "up_block_types": ["UpDecoderBlock2D"] * 4,
    "block_out_channels": [32, 32, 64, 64],
    "layers_per_block": 1,
    "latent_channels": flux2_vae.LATENT_CHANNELS,
    "norm_num_groups": 32,
    "use_quant_conv": True,
    "use_post_quant_conv": True,
    "batch_norm_eps": flux2_vae.BATCH_NORM_EPS,
}
SEEDS = {"text_encoder": 21, "transformer": 22, "vae": 23}


@dataclass(frozen=True)
class Flux2Kit:
    root: Path
    diffusion_file: Path | None
    base_file: Path | None
    vae_file: Path | None
    text_encoder_dir: Path | None
    diffusers_dir: Path | None
    loras: dict[str, Path] = field(default_factory=dict[str, Path])


def build_text_encoder(vocab_size: int) -> Any:
    seeded(SEEDS["text_encoder"])
    config = tiny_qwen3_config(vocab_size, TEXT_WIDTH, TEXT_LAYERS)
    return transformers().Qwen3ForCausalLM(config).eval()


def build_transformer() -> Any:
    seeded(SEEDS["transformer"])
    return diffusers().Flux2Transformer2DModel(**TRANSFORMER_CONFIG).eval()


def build_vae() -> Any:
    seeded(SEEDS["vae"])
    vae = diffusers().AutoencoderKLFlux2(**VAE_CONFIG).eval()
    with torch.no_grad():  # running statistics away from (0, 1), so the normalisation matters
        vae.bn.running_mean.normal_(0.0, 0.5)
        vae.bn.running_var.uniform_(0.5, 2.0)
    return vae


def build_scheduler() -> Any:
    config = {k: v for k, v in DEFAULT_SCHEDULER_CONFIG.items() if not k.startswith("_")}
    return diffusers().FlowMatchEulerDiscreteScheduler(**config)


def write_comfy_vae(vae: Any, out: Path) -> Path:
    """The VAE in ComfyUI's `flux2-vae` naming, as `vae/flux2_tiny_vae.safetensors`."""
    path = out / "vae" / "flux2_tiny_vae.safetensors"
    n_blocks = len(VAE_CONFIG["block_out_channels"])
    return save_weights(flux2_vae.to_file(vae.state_dict(), n_blocks), path, torch.float32)


def build_kit(out: Path, layouts: Sequence[str] = LAYOUTS) -> Flux2Kit:
    """Write the kit into the models folder `out`; returns where each piece went."""
    if unknown := set(layouts) - set(LAYOUTS):
        raise ValueError(f"unknown layouts {sorted(unknown)}; choose from {LAYOUTS}")
    quiet()
    tokenizer = qwen3_tokenizer()
    text_encoder = build_text_encoder(len(tokenizer))
    transformer = build_transformer()
    vae = build_vae()
    diffusion_file = base_file = vae_file = te_dir = diffusers_dir = None
    loras = write_kit_loras(out, "flux2_klein_tiny", transformer)
    if "comfy" in layouts:
        original = to_original(transformer.state_dict())
        diffusion_file = out / "diffusion_models" / "flux2_klein_tiny.safetensors"
        save_weights(original, diffusion_file, torch.float32)
        base_file = out / "diffusion_models" / "flux2_klein_base_tiny.safetensors"
        save_weights(original, base_file, torch.float32)
        vae_file = write_comfy_vae(vae, out)
        te_dir = out / "text_encoders" / "flux2_tiny_qwen3"
        text_encoder.save_pretrained(str(te_dir))
        tokenizer.save_pretrained(str(te_dir))
    if "diffusers" in layouts:
        diffusers_dir = out / "diffusion_models" / "flux2_klein_tiny_diffusers"
        diffusers().Flux2KleinPipeline(
            scheduler=build_scheduler(),
            vae=vae,
            text_encoder=text_encoder,
            tokenizer=tokenizer,
            transformer=transformer,
            is_distilled=True,
        ).save_pretrained(str(diffusers_dir))
    for category in ("diffusion_models", "vae", "text_encoders", "loras"):
        (out / category).mkdir(parents=True, exist_ok=True)
    return Flux2Kit(out, diffusion_file, base_file, vae_file, te_dir, diffusers_dir, loras)
