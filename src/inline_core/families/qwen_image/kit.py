"""Tiny random-weight Qwen-Image and Qwen-Image-Edit stacks, written in both layouts.

    inline-core kit --family qwen-image --out models/ [--size tiny|mid]

From fixed seeds: three transformers (text to image, edit 2509, and edit 2511: the same
architecture, each its own weights; 2511's modulates its references at timestep zero), the
Qwen-Image VAE, a Qwen2.5-VL text encoder with its vision tower, a byte-level BPE
tokenizer with Qwen2.5-VL's special tokens, its image processor, and Qwen-Image's scheduler:

- ComfyUI layout: `diffusion_models/qwen_image_<size>.safetensors`,
  `diffusion_models/qwen_image_edit_2509_<size>.safetensors`,
  `diffusion_models/qwen_image_edit_2511_<size>.safetensors` (as Comfy-Org's 2511 files: the
  diffusers names and ComfyUI's empty `__index_timestep_zero__` marker),
  `vae/qwen_image_vae_<size>.safetensors` (the Wan naming),
  `text_encoders/qwen_2.5_vl_<size>.safetensors` (the HF checkpoint naming) and its tokenizer
  and processor in `text_encoders/qwen_2.5_vl_tokenizer/`;
- diffusers layout: `diffusion_models/qwen_image_<size>_diffusers/` (`QwenImagePipeline`) and
  `diffusion_models/qwen_image_edit_<size>_diffusers/` (`QwenImageEditPlusPipeline`), and
  `diffusion_models/qwen_image_edit_2511_<size>_diffusers/` (the same, `zero_cond_t` on).

Both layouts hold the same weights, so they render the same pixels. Random weights draw noise.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import torch

from inline_core.diffusion.formats import qwen_image_vae
from inline_core.diffusion.kit import byte_tokenizer, kit_parser, report, save_weights, seeded
from inline_core.diffusion.libs import diffusers, quiet, transformers
from inline_core.families.qwen_image import processor
from inline_core.families.qwen_image.files import SCHEDULER_CONFIG, TOKENIZER_DIR
from inline_core.families.qwen_image.kit_loras import write_kit_loras
from inline_core.families.qwen_image.text_encoder import mrope_section
from inline_core.families.qwen_image.transformer import ZERO_COND_MARKER, axes_dims

SIZES = ("tiny", "mid")
LAYOUTS = ("comfy", "diffusers")
TEXT_WIDTH = 32
TRANSFORMER_CONFIGS: dict[str, dict[str, Any]] = {
    "tiny": {"num_layers": 2, "attention_head_dim": 32, "num_attention_heads": 2},
    # About 120M parameters, for benchmarks.
    "mid": {"num_layers": 8, "attention_head_dim": 128, "num_attention_heads": 6},
}
VAE_CONFIG: dict[str, Any] = {
    "base_dim": 8,
    "z_dim": qwen_image_vae.LATENT_CHANNELS,
    "dim_mult": [1, 2, 4, 4],
    "num_res_blocks": 2,
    "attn_scales": [],
    "temperal_downsample": [False, True, True],
}
SEEDS = {"text_encoder": 1, "transformer": 2, "vae": 3, "edit_transformer": 4, "edit_2511": 5}
SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
# What the image processor sees at most: the edit pipelines show it images of 384x384 pixels.
MAX_PIXELS = 512 * 512


@dataclass(frozen=True)
class KitPaths:
    root: Path
    model_file: Path | None
    edit_file: Path | None
    vae_file: Path | None
    text_encoder_file: Path | None
    tokenizer_dir: Path | None
    diffusers_dir: Path | None
    edit_diffusers_dir: Path | None
    loras: dict[str, Path] = field(default_factory=dict[str, Path])  # the text model's
    edit_2511_file: Path | None = None
    edit_2511_diffusers_dir: Path | None = None


def build_tokenizer() -> Any:
    return byte_tokenizer(SPECIAL_TOKENS, pad_token="<|endoftext|>", eos_token="<|im_end|>")


def build_image_processor() -> Any:
    return processor.image_processor(
        min_pixels=56 * 56,
        max_pixels=MAX_PIXELS,
        patch_size=14,
        temporal_patch_size=2,
        merge_size=2,
    )


def save_processor(tokenizer: Any, images: Any, folder: Path) -> Path:
    """The tokenizer and image processor files, as a Qwen processor folder holds them."""
    tokenizer.save_pretrained(str(folder))
    images.save_pretrained(str(folder))
    return folder


def text_encoder_config(tokenizer: Any) -> Any:
    head = 16
    ids = {
        "image_token_id": tokenizer.convert_tokens_to_ids("<|image_pad|>"),
        "video_token_id": tokenizer.convert_tokens_to_ids("<|video_pad|>"),
        "vision_start_token_id": tokenizer.convert_tokens_to_ids("<|vision_start|>"),
        "vision_end_token_id": tokenizer.convert_tokens_to_ids("<|vision_end|>"),
    }
    return transformers().Qwen2_5_VLConfig(
        text_config={
            "vocab_size": len(tokenizer),
            "hidden_size": TEXT_WIDTH,
            "intermediate_size": TEXT_WIDTH * 2,
            "num_hidden_layers": 2,
            "num_attention_heads": TEXT_WIDTH // head,
            "num_key_value_heads": 1,
            "rms_norm_eps": 1e-6,
            "max_position_embeddings": 128_000,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 1_000_000.0,
                "mrope_section": mrope_section(head),
            },
        },
        vision_config={
            "depth": 2,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 1,
            "in_channels": 3,
            "patch_size": 14,
            "temporal_patch_size": 2,
            "spatial_merge_size": 2,
            "window_size": 112,
            "out_hidden_size": TEXT_WIDTH,
            "fullatt_block_indexes": [],
        },
        **ids,
    )


def build_text_encoder(tokenizer: Any) -> Any:
    seeded(SEEDS["text_encoder"])
    lib = transformers()
    return lib.Qwen2_5_VLForConditionalGeneration(text_encoder_config(tokenizer)).eval()


def build_transformer(size: str, seed: int, zero_cond: bool = False) -> Any:
    seeded(seed)
    config = TRANSFORMER_CONFIGS[size]
    return (
        diffusers()
        .QwenImageTransformer2DModel(
            patch_size=2,
            in_channels=qwen_image_vae.LATENT_CHANNELS * 4,
            out_channels=qwen_image_vae.LATENT_CHANNELS,
            joint_attention_dim=TEXT_WIDTH,
            axes_dims_rope=tuple(axes_dims(config["attention_head_dim"])),
            zero_cond_t=zero_cond,
            **config,
        )
        .eval()
    )


def build_vae() -> Any:
    seeded(SEEDS["vae"])
    vae = diffusers().AutoencoderKLQwenImage(**VAE_CONFIG)
    with torch.no_grad():  # RMS gammas start at one and biases at zero: make every weight count
        for p in vae.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    return vae.eval()


def build_scheduler() -> Any:
    return diffusers().FlowMatchEulerDiscreteScheduler.from_config(SCHEDULER_CONFIG)


def original_text_encoder(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """`Qwen2_5_VLForConditionalGeneration` keys -> the HF checkpoints' (ComfyUI's file)."""
    out: dict[str, torch.Tensor] = {}
    for key, value in sd.items():
        if key.startswith("model.language_model."):
            key = "model." + key[len("model.language_model.") :]
        elif key.startswith("model.visual."):
            key = key[len("model.") :]
        out[key] = value
    return out


def save_edit_folder(
    transformer: Any, tokenizer: Any, images: Any, common: dict[str, Any], folder: Path
) -> Path:
    """A `QwenImageEditPlusPipeline` folder, its processor as Qwen's edit repos hold it (its
    video half needs torchvision, so it is written from its parts)."""
    diffusers().QwenImageEditPlusPipeline(
        transformer=transformer, tokenizer=tokenizer, processor=None, **common
    ).save_pretrained(str(folder))
    save_processor(tokenizer, images, folder / "processor")
    index = folder / "model_index.json"
    entries = json.loads(index.read_text("utf-8"))
    entries["processor"] = ["transformers", "Qwen2VLProcessor"]
    index.write_text(json.dumps(entries, indent=2), "utf-8")
    return folder


def build_kit(
    out: Path, size: str = "tiny", layouts: Sequence[str] = LAYOUTS, dtype: str | None = None
) -> KitPaths:
    """Write the kit for `size` into the models folder `out`; returns where each piece went."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {SIZES}")
    if unknown := set(layouts) - set(LAYOUTS):
        raise ValueError(f"unknown layouts {sorted(unknown)}; choose from {LAYOUTS}")
    weights = getattr(torch, dtype or ("float32" if size == "tiny" else "bfloat16"))
    quiet()
    tokenizer = build_tokenizer()
    images = build_image_processor()
    text_encoder = build_text_encoder(tokenizer)
    transformer = build_transformer(size, SEEDS["transformer"])
    edit = build_transformer(size, SEEDS["edit_transformer"])
    edit_2511 = build_transformer(size, SEEDS["edit_2511"], zero_cond=True)
    vae = build_vae()
    name = f"qwen_image_{size}"
    loras = write_kit_loras(out, name, transformer)
    model_file = edit_file = vae_file = te_file = tok_dir = folder = edit_folder = None
    file_2511 = folder_2511 = None
    if "comfy" in layouts:
        model_file = save_weights(
            transformer.state_dict(), out / "diffusion_models" / f"{name}.safetensors", weights
        )
        edit_file = save_weights(
            edit.state_dict(),
            out / "diffusion_models" / f"qwen_image_edit_2509_{size}.safetensors",
            weights,
        )
        file_2511 = save_weights(
            {**edit_2511.state_dict(), ZERO_COND_MARKER: torch.empty(0)},
            out / "diffusion_models" / f"qwen_image_edit_2511_{size}.safetensors",
            weights,
        )
        vae_file = save_weights(
            qwen_image_vae.to_original(vae.state_dict()),
            out / "vae" / f"qwen_image_vae_{size}.safetensors",
            torch.float32,
        )
        te_file = save_weights(
            original_text_encoder(text_encoder.state_dict()),
            out / "text_encoders" / f"qwen_2.5_vl_{size}.safetensors",
            torch.float32,
        )
        tok_dir = save_processor(tokenizer, images, out / "text_encoders" / TOKENIZER_DIR)
    if "diffusers" in layouts:
        lib = diffusers()
        common = {"scheduler": build_scheduler(), "vae": vae, "text_encoder": text_encoder}
        folder = out / "diffusion_models" / f"{name}_diffusers"
        lib.QwenImagePipeline(
            transformer=transformer.to(weights), tokenizer=tokenizer, **common
        ).save_pretrained(str(folder))
        edit_folder = out / "diffusion_models" / f"qwen_image_edit_{size}_diffusers"
        save_edit_folder(edit.to(weights), tokenizer, images, common, edit_folder)
        folder_2511 = out / "diffusion_models" / f"qwen_image_edit_2511_{size}_diffusers"
        save_edit_folder(edit_2511.to(weights), tokenizer, images, common, folder_2511)
    for category in ("diffusion_models", "vae", "text_encoders", "loras"):
        (out / category).mkdir(parents=True, exist_ok=True)
    return KitPaths(
        out,
        model_file,
        edit_file,
        vae_file,
        te_file,
        tok_dir,
        folder,
        edit_folder,
        loras,
        file_2511,
        folder_2511,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = kit_parser(
        "inline-core kit --family qwen-image",
        "Write tiny random-weight Qwen-Image models (they draw noise) into a folder.",
        sizes=SIZES,
        layouts=LAYOUTS,
    )
    args = parser.parse_args(argv)
    out = cast(Path, args.out)
    paths = build_kit(out, cast(str, args.size), cast(list[str] | None, args.layout) or LAYOUTS)
    written = [
        paths.model_file,
        paths.edit_file,
        paths.vae_file,
        paths.text_encoder_file,
        paths.tokenizer_dir,
        paths.diffusers_dir,
        paths.edit_diffusers_dir,
        paths.edit_2511_file,
        paths.edit_2511_diffusers_dir,
        *paths.loras.values(),
    ]
    print(report(out, written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
