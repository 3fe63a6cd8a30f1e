"""Tiny random-weight Wan models (2.1 text-to-video, 2.2 TI2V and 2.2 A14B's pair of experts),
written into a models folder in both layouts.

    inline-core kit --family wan --out models/

The kit builds, from fixed seeds, a UMT5 encoder with a byte-level tokenizer (shared), and for
each variant a Wan transformer, its VAE (the published layout at a tiny width: Wan 2.1's, or Wan
2.2's 48-channel residual one with the published latent statistics) and its UniPC scheduler
config, and writes:

- ComfyUI layout: `diffusion_models/wan2.1_t2v_tiny_fp32.safetensors` and
  `diffusion_models/wan2.2_ti2v_tiny_fp32.safetensors` (the Wan repository's key naming),
  `diffusion_models/wan2.2_t2v_high_noise_tiny_fp32.safetensors` and its sibling
  `..._low_noise_...` (the A14B pair: two transformers of the 2.1 shape, other seeds), and the
  i2v pair `wan2.2_i2v_high_noise_tiny_fp32.safetensors` / `..._low_noise_...` (36 channels in),
  `vae/wan_2.1_vae_tiny.safetensors` and `vae/wan2.2_vae_tiny.safetensors` (their naming too),
  `text_encoders/umt5_tiny_fp32.safetensors` and its tokenizer folder
  `text_encoders/umt5_tiny_tokenizer/`;
- diffusers layout: `diffusion_models/wan2.1_t2v_tiny_diffusers/` and
  `diffusion_models/wan2.2_ti2v_tiny_diffusers/` (`WanPipeline.save_pretrained`; the TI2V one with
  `expand_timesteps`, as diffusers' Wan2.2-TI2V-5B folder), and
  `diffusion_models/wan2.2_t2v_a14b_tiny_diffusers/` (`transformer`, `transformer_2` and
  `boundary_ratio`, as diffusers' Wan2.2-T2V-A14B folder) and `wan2.2_i2v_a14b_tiny_diffusers/`
  (a `WanImageToVideoPipeline` without an image encoder, as Wan2.2-I2V-A14B's); Wan 2.1 i2v as
  `diffusion_models/wan2.1_i2v_tiny_fp32.safetensors` with a tiny CLIP vision encoder
  `clip_vision/clip_vision_h_tiny_fp32.safetensors`, and `wan2.1_i2v_tiny_diffusers/` (its
  `image_encoder/` and `image_processor/` inside);
- `vae_approx/lighttaew2_1.safetensors` and `vae_approx/lighttaew2_2.safetensors`: tiny TAEHV
  decoders for the `taesd` previews of Wan 2.1's and Wan 2.2's latents, named as ComfyUI looks
  for them (`diffusion/preview/kit.py`);
- `loras/wan2.1_t2v_tiny_lora_a*.safetensors` (one Wan 2.1 LoRA in the diffusers/PEFT, ComfyUI,
  ai-toolkit and musubi-tuner namings) and `loras/wan2.1_t2v_tiny_lora_b.safetensors` (another,
  on other layers; `kit_loras.py`).

Both layouts hold the same weights, so they render the same frames. Random weights draw noise.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import torch

from inline_core.diffusion.formats import umt5, wan22_vae, wan_vae
from inline_core.diffusion.kit import byte_tokenizer, kit_parser, report, save_weights, seeded
from inline_core.diffusion.libs import diffusers, quiet, transformers
from inline_core.diffusion.preview.formats import preview_format
from inline_core.diffusion.preview.kit import write_tiny_decoder
from inline_core.families.wan import transformer as wan_transformer
from inline_core.families.wan.clip_vision import PROCESSOR_CONFIG
from inline_core.families.wan.family import PREVIEW_LATENTS
from inline_core.families.wan.files import DEFAULT_SCHEDULER_CONFIG
from inline_core.families.wan.kit_loras import write_kit_loras
from inline_core.families.wan.request import MAX_PROMPT_TOKENS
from inline_core.families.wan.transformer import I2V_CHANNELS
from inline_core.families.wan.variants import A14B_I2V, A14B_T2V, TI2V

LAYOUTS = ("comfy", "diffusers")
VARIANTS = ("t2v", "ti2v", "a14b", "a14b_i2v", "i2v")
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
SEEDS = {
    "text_encoder": 21,
    "transformer": 22,
    "vae": 23,
    "ti2v_transformer": 24,
    "ti2v_vae": 25,
    "a14b_high": 26,
    "a14b_low": 27,
    "i2v_high": 28,
    "i2v_low": 29,
    "i2v": 30,
    "clip_vision": 31,
}
# Wan 2.1 i2v's CLIP vision encoder, tiny: the published tower's layout (224 px, 14 px patches,
# 16 heads), 32 wide.
CLIP_VISION_CONFIG: dict[str, Any] = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 16,
    "image_size": 224,
    "patch_size": 14,
    "hidden_act": "gelu",
    "layer_norm_eps": 1e-5,
    "projection_dim": 16,
}
CLIP_VISION_FILE = "clip_vision_h_tiny_fp32"
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
# Wan 2.2 A14B: the Wan 2.1 stack with two experts, switched at the published boundary.
A14B_SCHEDULER_CONFIG: dict[str, Any] = {**DEFAULT_SCHEDULER_CONFIG, "flow_shift": A14B_T2V.shift}
A14B_BOUNDARY = A14B_T2V.boundary
A14B_FILES = ("wan2.2_t2v_high_noise_tiny_fp32", "wan2.2_t2v_low_noise_tiny_fp32")
A14B_I2V_FILES = ("wan2.2_i2v_high_noise_tiny_fp32", "wan2.2_i2v_low_noise_tiny_fp32")


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
    a14b_high_file: Path | None = None
    a14b_low_file: Path | None = None
    a14b_diffusers_dir: Path | None = None
    a14b_i2v_high_file: Path | None = None
    a14b_i2v_low_file: Path | None = None
    a14b_i2v_diffusers_dir: Path | None = None
    i2v_diffusion_file: Path | None = None
    clip_vision_file: Path | None = None
    i2v_diffusers_dir: Path | None = None
    loras: dict[str, Path] = field(default_factory=dict[str, Path])
    # The tiny `taesd` preview decoders, by latent format ("wan21", "wan22").
    tiny_decoders: dict[str, Path] = field(default_factory=dict[str, Path])


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


@dataclass(frozen=True)
class KitVariant:
    """How one variant's tiny stack is built and written."""

    experts: tuple[tuple[dict[str, Any], str], ...]  # (config, seed name) per expert, high first
    files: tuple[str, ...]  # each expert's ComfyUI file name (no suffix)
    folder: str  # its diffusers folder
    pipeline: str  # the diffusers pipeline class that writes the folder
    options: dict[str, Any]  # that pipeline's arguments beyond its parts
    scheduler: dict[str, Any]
    wan22_vae: bool = False  # Wan 2.2's 48-channel VAE (else Wan 2.1's)
    clip_vision: bool = False  # Wan 2.1 i2v: a CLIP vision encoder and its image processor


I2V_TRANSFORMER_CONFIG: dict[str, Any] = {**TRANSFORMER_CONFIG, "in_channels": I2V_CHANNELS}
WAN21_I2V_TRANSFORMER_CONFIG: dict[str, Any] = {
    **I2V_TRANSFORMER_CONFIG,
    "image_dim": CLIP_VISION_CONFIG["hidden_size"],
    "added_kv_proj_dim": TRANSFORMER_CONFIG["num_attention_heads"]
    * TRANSFORMER_CONFIG["attention_head_dim"],
}
KIT_VARIANTS: dict[str, KitVariant] = {
    "t2v": KitVariant(
        ((TRANSFORMER_CONFIG, "transformer"),),
        ("wan2.1_t2v_tiny_fp32",),
        "wan2.1_t2v_tiny_diffusers",
        "WanPipeline",
        {},
        DEFAULT_SCHEDULER_CONFIG,
    ),
    "ti2v": KitVariant(
        ((TI2V_TRANSFORMER_CONFIG, "ti2v_transformer"),),
        ("wan2.2_ti2v_tiny_fp32",),
        "wan2.2_ti2v_tiny_diffusers",
        "WanPipeline",
        {"expand_timesteps": True},
        TI2V_SCHEDULER_CONFIG,
        wan22_vae=True,
    ),
    "a14b": KitVariant(
        ((TRANSFORMER_CONFIG, "a14b_high"), (TRANSFORMER_CONFIG, "a14b_low")),
        A14B_FILES,
        "wan2.2_t2v_a14b_tiny_diffusers",
        "WanPipeline",
        {"boundary_ratio": A14B_BOUNDARY},
        A14B_SCHEDULER_CONFIG,
    ),
    "a14b_i2v": KitVariant(
        ((I2V_TRANSFORMER_CONFIG, "i2v_high"), (I2V_TRANSFORMER_CONFIG, "i2v_low")),
        A14B_I2V_FILES,
        "wan2.2_i2v_a14b_tiny_diffusers",
        "WanImageToVideoPipeline",
        {"boundary_ratio": A14B_I2V.boundary},
        {**DEFAULT_SCHEDULER_CONFIG, "flow_shift": A14B_I2V.shift},
    ),
    "i2v": KitVariant(
        ((WAN21_I2V_TRANSFORMER_CONFIG, "i2v"),),
        ("wan2.1_i2v_tiny_fp32",),
        "wan2.1_i2v_tiny_diffusers",
        "WanImageToVideoPipeline",
        {},
        DEFAULT_SCHEDULER_CONFIG,
        clip_vision=True,
    ),
}
EXPERTS = ("transformer", "transformer_2")


def build_parts(variant: str = "t2v") -> dict[str, Any]:
    """The tiny stack of one variant (`KIT_VARIANTS`; a pair's experts as `transformer` and
    `transformer_2`), as diffusers' Wan pipelines take their parts."""
    quiet()
    kind = KIT_VARIANTS[variant]
    tokenizer = build_tokenizer()
    seeded(SEEDS["text_encoder"])
    config = umt5_config(len(tokenizer), int(tokenizer.pad_token_id))
    text_encoder = transformers().UMT5EncoderModel(config).eval()
    experts: dict[str, Any] = {}
    for part, (transformer_config, seed) in zip(EXPERTS, kind.experts, strict=False):
        seeded(SEEDS[seed])
        experts[part] = diffusers().WanTransformer3DModel(**transformer_config).eval()
    seeded(SEEDS["ti2v_vae" if kind.wan22_vae else "vae"])
    vae = diffusers().AutoencoderKLWan(**(TI2V_VAE_CONFIG if kind.wan22_vae else VAE_CONFIG))
    scheduler = diffusers().UniPCMultistepScheduler.from_config(kind.scheduler)
    vision: dict[str, Any] = {}
    if kind.clip_vision:
        seeded(SEEDS["clip_vision"])
        config = transformers().CLIPVisionConfig(**CLIP_VISION_CONFIG)
        vision["image_encoder"] = transformers().CLIPVisionModel(config).eval()
        vision["image_processor"] = transformers().CLIPImageProcessor(**PROCESSOR_CONFIG)
    return {
        "tokenizer": tokenizer,
        "text_encoder": text_encoder,
        **experts,
        "vae": vae.eval(),
        "scheduler": scheduler,
        **vision,
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
        kind = KIT_VARIANTS[variant]
        parts = build_parts(variant)
        if variant == "t2v":
            loras = write_kit_loras(out, "wan2.1_t2v_tiny", parts["transformer"])
        if "comfy" in layouts:
            for expert, name in zip(EXPERTS, kind.files, strict=False):
                path = out / "diffusion_models" / f"{name}.safetensors"
                sd = wan_transformer.to_original(parts[expert].state_dict())
                save_weights(sd, path, torch.float32)
                written[f"{variant}_{expert}"] = path
            vae_name = "wan2.2_vae_tiny" if kind.wan22_vae else "wan_2.1_vae_tiny"
            vae_file = out / "vae" / f"{vae_name}.safetensors"
            to_original = wan22_vae.to_original if kind.wan22_vae else wan_vae.to_original
            save_weights(to_original(parts["vae"].state_dict()), vae_file, torch.float32)
            written[f"{variant}_vae"] = vae_file
            written.update(_write_text_encoder(out, parts))
            if kind.clip_vision:
                written["clip_vision"] = _write_clip_vision(out, parts["image_encoder"])
        if "diffusers" in layouts:
            folder = out / "diffusion_models" / kind.folder
            pipeline = getattr(diffusers(), kind.pipeline)(**parts, **kind.options)
            pipeline.save_pretrained(str(folder))
            written[f"{variant}_diffusers"] = folder
    for category in ("diffusion_models", "vae", "text_encoders", "clip_vision", "loras"):
        (out / category).mkdir(parents=True, exist_ok=True)
    channels = {
        wan22_vae.LATENT_CHANNELS if KIT_VARIANTS[v].wan22_vae else wan_vae.LATENT_CHANNELS
        for v in variants
    }
    formats = {PREVIEW_LATENTS[c] for c in channels}
    tiny_decoders = {f: write_tiny_decoder(out, preview_format(f)) for f in sorted(formats)}
    return WanKit(
        out,
        diffusion_file=written.get("t2v_transformer"),
        # Every variant but the 5B writes the same Wan 2.1 VAE.
        vae_file=next(
            (p for k, p in written.items() if k.endswith("_vae") and "ti2v" not in k), None
        ),
        text_encoder_file=written.get("text_encoder"),
        tokenizer_dir=written.get("tokenizer"),
        diffusers_dir=written.get("t2v_diffusers"),
        ti2v_diffusion_file=written.get("ti2v_transformer"),
        ti2v_vae_file=written.get("ti2v_vae"),
        ti2v_diffusers_dir=written.get("ti2v_diffusers"),
        a14b_high_file=written.get("a14b_transformer"),
        a14b_low_file=written.get("a14b_transformer_2"),
        a14b_diffusers_dir=written.get("a14b_diffusers"),
        a14b_i2v_high_file=written.get("a14b_i2v_transformer"),
        a14b_i2v_low_file=written.get("a14b_i2v_transformer_2"),
        a14b_i2v_diffusers_dir=written.get("a14b_i2v_diffusers"),
        i2v_diffusion_file=written.get("i2v_transformer"),
        clip_vision_file=written.get("clip_vision"),
        i2v_diffusers_dir=written.get("i2v_diffusers"),
        loras=loras,
        tiny_decoders=tiny_decoders,
    )


def _write_clip_vision(out: Path, encoder: Any) -> Path:
    """ComfyUI's naming: transformers' `CLIPVisionModelWithProjection` keys, its projection
    included (the real file has one; Wan does not use it)."""
    path = out / "clip_vision" / f"{CLIP_VISION_FILE}.safetensors"
    prefix = "vision_model."
    items = encoder.state_dict().items()
    sd = {k if k.startswith(prefix) else prefix + k: v for k, v in items}
    seeded(SEEDS["clip_vision"] + 100)
    width = CLIP_VISION_CONFIG["hidden_size"]
    sd["visual_projection.weight"] = torch.randn(CLIP_VISION_CONFIG["projection_dim"], width)
    save_weights(sd, path, torch.float32)
    return path


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
    parser = kit_parser(
        "inline-core kit --family wan",
        "Write tiny random-weight Wan models (they draw noise) into a folder.",
        layouts=LAYOUTS,
    )
    parser.add_argument(
        "--variant",
        choices=VARIANTS,
        action="append",
        help=(
            "write only this variant (t2v and i2v: Wan 2.1, ti2v: Wan 2.2 TI2V, a14b and "
            "a14b_i2v: Wan 2.2 A14B's two experts, text or image to video; repeatable)"
        ),
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
        kit.a14b_high_file,
        kit.a14b_low_file,
        kit.a14b_i2v_high_file,
        kit.a14b_i2v_low_file,
        kit.i2v_diffusion_file,
        kit.clip_vision_file,
        kit.text_encoder_file,
        kit.tokenizer_dir,
        kit.diffusers_dir,
        kit.ti2v_diffusers_dir,
        kit.a14b_diffusers_dir,
        kit.a14b_i2v_diffusers_dir,
        kit.i2v_diffusers_dir,
        *kit.loras.values(),
        *kit.tiny_decoders.values(),
    ]
    print(report(out, written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
