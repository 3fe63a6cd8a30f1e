"""Tiny random-weight SD 1.5 models, written into a models folder, offline.

    inline-core kit --family sd15 --out models/

An SD 1.x UNet (no size embedding, 8 heads, convolution projections, no attention on its last
level), SDXL's kit VAE at SD's latent scale, SDXL's kit CLIP-L and CLIP tokenizer, from fixed
seeds, written as `checkpoints/sd15_tiny.safetensors` in the original naming
(`model.diffusion_model.`, `first_stage_model.`, `cond_stage_model.transformer.`) and as
`sd15_tiny_vpred.safetensors` (the same, marked as a v-prediction checkpoint), with
`text_encoders/clip_tokenizer/` and a tiny `vae_approx/taesd_decoder` for its previews. Random
weights draw noise.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import torch

from inline_core.diffusion.formats import clip
from inline_core.diffusion.kit import kit_parser, report, save_weights, seeded
from inline_core.diffusion.libs import diffusers, quiet
from inline_core.diffusion.preview.formats import preview_format
from inline_core.diffusion.preview.kit import write_tiny_decoder
from inline_core.families.sdxl import unet
from inline_core.families.sdxl.files import V_PRED_KEY
from inline_core.families.sdxl.kit import (
    L_WIDTH,
    TOKENIZER_FOLDER,
    VAE_CONFIG,
    build_text_encoders,
    build_tokenizer,
)
from inline_core.families.sdxl.kit_checkpoint import original_checkpoint
from inline_core.families.sdxl.sd15 import PREVIEW
from inline_core.families.sdxl.sd15_files import SD15_VAE_SCALING

SD15_UNET_SEED, SD15_VAE_SEED = 7, 4  # the VAE: SDXL kit's weights
UNET_CONFIG: dict[str, Any] = {
    "sample_size": 64,
    "in_channels": 4,
    "out_channels": 4,
    "block_out_channels": (64, 128),
    "layers_per_block": 2,
    "down_block_types": ["CrossAttnDownBlock2D", "DownBlock2D"],
    "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D"],
    "attention_head_dim": unet.SD1_HEADS,
    "cross_attention_dim": L_WIDTH,
    "use_linear_projection": False,
}
SD15_VAE_CONFIG: dict[str, Any] = {**VAE_CONFIG, "scaling_factor": SD15_VAE_SCALING}


@dataclass(frozen=True)
class SD15Kit:
    root: Path
    checkpoint: Path
    tokenizer_dir: Path


def build_sd15_unet() -> Any:
    seeded(SD15_UNET_SEED)
    model = diffusers().UNet2DConditionModel(**UNET_CONFIG)
    with torch.no_grad():  # random output weights: every step counts
        for p in model.conv_out.parameters():
            p.normal_(0.0, 0.05)
    return model.eval()


def build_sd15_vae() -> Any:
    seeded(SD15_VAE_SEED)
    return diffusers().AutoencoderKL(**SD15_VAE_CONFIG).eval()


def build_sd15_kit(out: Path) -> SD15Kit:
    quiet()
    first, _second = build_text_encoders()
    model, vae = build_sd15_unet(), build_sd15_vae()
    encoder = ("cond_stage_model.transformer.", clip.with_text_model(first.state_dict()))
    state = original_checkpoint(model, vae, (encoder,))
    checkpoint = out / "checkpoints" / "sd15_tiny.safetensors"
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    save_weights(state, checkpoint, torch.float32)
    # The same weights marked as a v-prediction checkpoint (random weights do not care).
    vpred = checkpoint.with_name("sd15_tiny_vpred.safetensors")
    save_weights({**state, V_PRED_KEY: torch.zeros(0)}, vpred, torch.float32)
    tokenizer_dir = out / "text_encoders" / TOKENIZER_FOLDER
    build_tokenizer(tokenizer_dir)
    write_tiny_decoder(out, preview_format(PREVIEW))
    return SD15Kit(out, checkpoint, tokenizer_dir)


def main(argv: Sequence[str] | None = None) -> int:
    parser = kit_parser(
        "inline-core kit --family sd15",
        "Write tiny random-weight SD 1.5 models (they draw noise) into a folder.",
    )
    args = parser.parse_args(argv)
    kit = build_sd15_kit(cast(Path, args.out))
    print(report(kit.root, [kit.checkpoint, kit.tokenizer_dir]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
