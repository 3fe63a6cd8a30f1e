"""Tiny random-weight SDXL models, written into a models folder in both layouts, offline.

    inline-core kit --family sdxl --out models/ [--size tiny|mid]

The kit builds an SDXL UNet (pooled text and size embedding), an SDXL-scaled `AutoencoderKL`, a
CLIP-L and an OpenCLIP-G text encoder and a byte-level CLIP tokenizer (CLIP's special tokens,
its `</w>` word ends, `!` as id 0), from fixed seeds, and writes:

- ComfyUI layout: `checkpoints/sdxl_<size>.safetensors`, one all-in-one checkpoint in the
  original Stability naming (`model.diffusion_model.`, `first_stage_model.`,
  `conditioner.embedders.0.transformer.` CLIP-L, `conditioner.embedders.1.model.` OpenCLIP-G),
  `checkpoints/sdxl_<size>_vpred.safetensors` (the same, marked as a v-prediction checkpoint),
  `checkpoints/sdxl_<size>_refiner.safetensors` (a refiner: `kit_refiner.py`),
  `checkpoints/sdxl_<size>_fp8_e4m3fn.safetensors` and `..._fp8_scaled.safetensors` (its UNet
  in fp8, as ComfyUI's fp8 files: `kit_fp8.py`),
  `text_encoders/clip_tokenizer/` (a checkpoint carries no tokenizer; ComfyUI ships its own),
  two kohya LoRAs in `loras/` and a textual-inversion embedding in `embeddings/` (`kit_loras.py`);
- diffusers layout: `diffusion_models/sdxl_<size>_diffusers/` (`StableDiffusionXLPipeline`);
- a tiny `vae_approx/taesdxl_decoder.safetensors` for its latents' `taesd` previews.

Both layouts hold the same weights, so they render the same pixels. Random weights draw noise.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import torch

from inline_core.diffusion.formats import clip
from inline_core.diffusion.kit import byte_alphabet, kit_parser, report, save_weights, seeded
from inline_core.diffusion.libs import diffusers, quiet, transformers
from inline_core.diffusion.preview.formats import preview_format
from inline_core.diffusion.preview.kit import write_tiny_decoder
from inline_core.families.sdxl import unet
from inline_core.families.sdxl.files import V_PRED_KEY
from inline_core.families.sdxl.kit_checkpoint import original_checkpoint
from inline_core.families.sdxl.kit_fp8 import write_fp8_checkpoints
from inline_core.families.sdxl.kit_loras import write_kit_embedding, write_kit_loras
from inline_core.families.sdxl.kit_refiner import write_refiner_checkpoint
from inline_core.families.sdxl.pipeline import PREVIEW_FORMAT

SIZES = ("tiny", "mid")
LAYOUTS = ("comfy", "diffusers")
SEEDS = {"text_encoder": 1, "text_encoder_2": 2, "unet": 3, "vae": 4, "inpaint_unet": 5}
TOKENIZER_FOLDER = "clip_tokenizer"
BOS, EOS = "<|startoftext|>", "<|endoftext|>"
MAX_LENGTH = 77

L_WIDTH, G_WIDTH, G_PROJECTION = 64, 128, 64
UNET_CONFIGS: dict[str, dict[str, Any]] = {
    "tiny": {
        "block_out_channels": (64, 128),
        "layers_per_block": 2,
        "transformer_layers_per_block": (1, 2),
    },
    # About 100M parameters, for benchmarks.
    "mid": {
        "block_out_channels": (192, 384, 768),
        "layers_per_block": 2,
        "transformer_layers_per_block": (1, 2, 2),
    },
}
VAE_CONFIG: dict[str, Any] = {
    "in_channels": 3,
    "out_channels": 3,
    "down_block_types": ["DownEncoderBlock2D"] * 4,
    "up_block_types": ["UpDecoderBlock2D"] * 4,
    "block_out_channels": [32, 32, 64, 64],
    "layers_per_block": 1,
    "latent_channels": 4,
    "norm_num_groups": 32,
    "sample_size": 1024,
    "scaling_factor": 0.13025,
    "force_upcast": True,
}
# SDXL base's scheduler, as its diffusers repo has it.
SCHEDULER_CONFIG: dict[str, Any] = {
    "beta_start": 0.00085,
    "beta_end": 0.012,
    "beta_schedule": "scaled_linear",
    "num_train_timesteps": 1000,
    "prediction_type": "epsilon",
    "steps_offset": 1,
    "timestep_spacing": "leading",
    "interpolation_type": "linear",
    "use_karras_sigmas": False,
}


@dataclass(frozen=True)
class SDXLKit:
    root: Path
    checkpoint: Path | None
    tokenizer_dir: Path | None
    diffusers_dir: Path | None
    tiny_decoder: Path | None = None  # vae_approx/taesdxl_decoder.safetensors (previews)
    loras: Mapping[str, Path] = field(default_factory=dict[str, Path])  # kohya LoRAs "a", "b"
    embedding: Path | None = None  # embeddings/<name>_embedding.safetensors (clip_l, clip_g)
    refiner: Path | None = None  # checkpoints/<name>_refiner.safetensors (`kit_refiner.py`)
    fp8: tuple[Path, ...] = ()  # its fp8_e4m3fn and fp8_scaled copies (`kit_fp8.py`)

    @property
    def checkpoint_name(self) -> str:
        return "" if self.checkpoint is None else self.checkpoint.name


def clip_vocab() -> dict[str, int]:
    """CLIP's vocabulary shape with no merges: each byte character, alone and as a word's end,
    in CLIP's order (`!` is 0), then its two special tokens (the two last ids)."""
    chars = sorted(byte_alphabet(), key=ord)
    words = [*chars, *(c + "</w>" for c in chars), BOS, EOS]
    return {w: i for i, w in enumerate(words)}


def build_tokenizer(folder: Path, pad_token: str = EOS) -> Any:
    folder.mkdir(parents=True, exist_ok=True)
    vocab, merges = folder / "vocab.json", folder / "merges.txt"
    vocab.write_text(json.dumps(clip_vocab()), encoding="utf-8")
    merges.write_text("#version: 0.2\n", encoding="utf-8")
    tokenizer = transformers().CLIPTokenizer(
        str(vocab), str(merges), pad_token=pad_token, model_max_length=MAX_LENGTH
    )
    tokenizer.save_pretrained(str(folder))
    return tokenizer


def clip_config(width: int, projection: int, activation: str) -> Any:
    vocab = len(clip_vocab())
    return transformers().CLIPTextConfig(
        vocab_size=vocab,
        hidden_size=width,
        intermediate_size=width * 2,
        num_hidden_layers=3,
        num_attention_heads=width // clip.HEAD_WIDTH,
        max_position_embeddings=MAX_LENGTH,
        projection_dim=projection,
        hidden_act=activation,
        layer_norm_eps=clip.LAYER_NORM_EPS,
        bos_token_id=vocab - 2,
        eos_token_id=vocab - 1,
        pad_token_id=1,
    )


def build_text_encoders() -> tuple[Any, Any]:
    seeded(SEEDS["text_encoder"])
    first = transformers().CLIPTextModel(clip_config(L_WIDTH, L_WIDTH, "quick_gelu")).eval()
    seeded(SEEDS["text_encoder_2"])
    config = clip_config(G_WIDTH, G_PROJECTION, "gelu")
    second = transformers().CLIPTextModelWithProjection(config).eval()
    return first, second


def unet_config(size: str, in_channels: int = 4) -> dict[str, Any]:
    levels = len(UNET_CONFIGS[size]["block_out_channels"])
    channels = UNET_CONFIGS[size]["block_out_channels"]
    return {
        **UNET_CONFIGS[size],
        "sample_size": 128,
        "in_channels": in_channels,
        "out_channels": 4,
        "down_block_types": ["DownBlock2D"] + ["CrossAttnDownBlock2D"] * (levels - 1),
        "up_block_types": ["CrossAttnUpBlock2D"] * (levels - 1) + ["UpBlock2D"],
        "attention_head_dim": [c // unet.HEAD_WIDTH for c in channels],
        "use_linear_projection": True,
        "cross_attention_dim": L_WIDTH + G_WIDTH,
        "addition_embed_type": "text_time",
        "addition_time_embed_dim": unet.TIME_EMBED_DIM,
        "projection_class_embeddings_input_dim": G_PROJECTION + 6 * unet.TIME_EMBED_DIM,
    }


def build_unet(size: str, in_channels: int = 4) -> Any:
    seeded(SEEDS["unet" if in_channels == 4 else "inpaint_unet"])
    model = diffusers().UNet2DConditionModel(**unet_config(size, in_channels))
    # diffusers zeroes the output conv; random weights there make every step count.
    with torch.no_grad():
        for p in model.conv_out.parameters():
            p.normal_(0.0, 0.05)
    return model.eval()


def build_vae() -> Any:
    seeded(SEEDS["vae"])
    return diffusers().AutoencoderKL(**VAE_CONFIG).eval()


def checkpoint_state(unet_model: Any, vae: Any, first: Any, second: Any) -> dict[str, Any]:
    """The four parts in the original Stability naming, each under its checkpoint prefix."""
    return original_checkpoint(
        unet_model,
        vae,
        (
            ("conditioner.embedders.0.transformer.", clip.with_text_model(first.state_dict())),
            ("conditioner.embedders.1.model.", clip.to_openclip(second.state_dict())),
        ),
    )


def write_inpaint_checkpoint(out: Path, size: str = "tiny") -> tuple[Path, Any]:
    """An inpaint checkpoint (a UNet of 9 input channels: latents, mask, masked image, as
    SDXL's inpainting checkpoints) with the kit's VAE and text encoders, in
    `out/checkpoints/`; the file and its UNet (diffusers')."""
    first, second = build_text_encoders()
    model, vae = build_unet(size, in_channels=9), build_vae()
    path = out / "checkpoints" / f"sdxl_{size}_inpaint.safetensors"
    path.parent.mkdir(parents=True, exist_ok=True)
    save_weights(checkpoint_state(model, vae, first, second), path, torch.float32)
    return path, model


def build_kit(
    out: Path, size: str = "tiny", layouts: Sequence[str] = LAYOUTS, dtype: str | None = None
) -> SDXLKit:
    if size not in SIZES:
        raise ValueError(f"size must be one of {SIZES}")
    if unknown := set(layouts) - set(LAYOUTS):
        raise ValueError(f"unknown layouts {sorted(unknown)}; choose from {LAYOUTS}")
    weights = getattr(torch, dtype or ("float32" if size == "tiny" else "float16"))
    quiet()
    first, second = build_text_encoders()
    unet_model, vae = build_unet(size), build_vae()
    name = f"sdxl_{size}"
    checkpoint = tokenizer_dir = diffusers_dir = refiner = None
    fp8: tuple[Path, ...] = ()
    loras: dict[str, Path] = {}
    embedding = None
    for category in (
        "checkpoints",
        "diffusion_models",
        "vae",
        "text_encoders",
        "loras",
        "embeddings",
    ):
        (out / category).mkdir(parents=True, exist_ok=True)
    if "comfy" in layouts:
        checkpoint = out / "checkpoints" / f"{name}.safetensors"
        state = checkpoint_state(unet_model, vae, first, second)
        save_weights(state, checkpoint, weights)
        fp8 = write_fp8_checkpoints(checkpoint)
        # The same weights marked as a v-prediction checkpoint (random weights do not care).
        marked = {**state, V_PRED_KEY: torch.zeros(0)}
        save_weights(marked, out / "checkpoints" / f"{name}_vpred.safetensors", weights)
        tokenizer_dir = out / "text_encoders" / TOKENIZER_FOLDER
        build_tokenizer(tokenizer_dir)
        loras = write_kit_loras(out, name, unet_model, first, second)
        embedding = write_kit_embedding(out, name, first, second)
        refiner, _ = write_refiner_checkpoint(out, name, second, vae, weights)
    if "diffusers" in layouts:
        scratch = out / ".kit_tokenizers"
        pipe = diffusers().StableDiffusionXLPipeline(
            vae=vae,
            text_encoder=first,
            text_encoder_2=second,
            tokenizer=build_tokenizer(scratch / "tokenizer"),
            tokenizer_2=build_tokenizer(scratch / "tokenizer_2", pad_token="!"),
            unet=unet_model.to(weights),
            scheduler=diffusers().EulerDiscreteScheduler(**SCHEDULER_CONFIG),
        )
        diffusers_dir = out / "diffusion_models" / f"{name}_diffusers"
        pipe.save_pretrained(str(diffusers_dir))
        import shutil

        shutil.rmtree(scratch)
    # The tiny decoder for its latents' previews (`taesd`), where ComfyUI keeps it.
    tiny_decoder = write_tiny_decoder(out, preview_format(PREVIEW_FORMAT))
    return SDXLKit(
        out, checkpoint, tokenizer_dir, diffusers_dir, tiny_decoder, loras, embedding, refiner, fp8
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = kit_parser(
        "inline-core kit --family sdxl",
        "Write tiny random-weight SDXL models (they draw noise) into a folder.",
        sizes=SIZES,
        layouts=LAYOUTS,
    )
    args = parser.parse_args(argv)
    out = cast(Path, args.out)
    layouts = cast(list[str] | None, args.layout) or list(LAYOUTS)
    kit = build_kit(out, cast(str, args.size), layouts)
    print(report(out, [kit.checkpoint, kit.tokenizer_dir, kit.diffusers_dir, kit.tiny_decoder]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
