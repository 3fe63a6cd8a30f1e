"""Tiny random-weight FLUX.2 dev models, written into a models folder in both layouts
(`kit_command.py` writes them beside klein's).

FLUX.2 dev is klein's transformer with a guidance embedder, read by a Mistral Small 3 (a
`Mistral3ForConditionalGeneration`: a language model and a vision tower). The kit builds:

- a dev transformer shaped as klein's tiny one, with its guidance embedder and a text input three
  Mistral widths wide;
- a tiny Mistral3 (32 layers, so the three FLUX.2 reads, 10, 20 and 30, sit inside it) whose
  tokenizer is Mistral's tekken format (one token per byte, Mistral's control tokens), converted
  as a ComfyUI file's is;
- FLUX.2's VAE (klein's kit's).

- ComfyUI layout: `diffusion_models/flux2_dev_tiny.safetensors` (BFL's naming),
  `text_encoders/mistral_3_small_flux2_tiny.safetensors` (ComfyUI's: the language model pruned to
  30 layers without its final norm, `tekken.json` inside), `vae/flux2_tiny_vae.safetensors`;
- diffusers layout: `diffusion_models/flux2_dev_tiny_diffusers/` (`Flux2Pipeline`);
- `loras/flux2_dev_tiny_lora_*.safetensors`: klein's kit LoRAs, for this transformer, and
  `loras/flux2_dev_tiny_turbo_lora.safetensors`, a LoRA on every layer in BFL's naming as the
  templates' Turbo LoRA is (and its twin in diffusers' naming).

Both layouts hold the same weights and tokenizer, so they render the same pixels.
"""

from __future__ import annotations

import base64
import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from inline_core.diffusion.formats import mistral3
from inline_core.diffusion.kit import save_weights, seeded
from inline_core.diffusion.libs import diffusers, quiet, save_safetensors, transformers
from inline_core.families.flux2.kit import (
    TRANSFORMER_CONFIG,
    build_scheduler,
    build_vae,
    write_comfy_vae,
)
from inline_core.families.flux2.kit_loras import write_kit_loras, write_turbo_loras
from inline_core.families.flux2.transformer import to_original

DEV_LAYOUTS = ("comfy", "diffusers")
MISTRAL_WIDTH = 32  # as wide as klein's tiny Qwen3: only the variant tells which one fits
MISTRAL_LAYERS = 32
DEV_TRANSFORMER_CONFIG: dict[str, Any] = {
    **TRANSFORMER_CONFIG,
    "joint_attention_dim": MISTRAL_WIDTH * 3,
    "guidance_embeds": True,
}
SEEDS = {"text_encoder": 31, "transformer": 32}
# Mistral's control tokens at their ranks in a tekken file; the vocabulary is one token a byte.
SPECIAL_TOKENS = (
    "<unk>",
    "<s>",
    "</s>",
    "[INST]",
    "[/INST]",
    "[SYSTEM_PROMPT]",
    "[/SYSTEM_PROMPT]",
    "<pad>",
    "[IMG]",
)
# tekken's pre-tokenizer pattern (Mistral Small 3's).
PATTERN = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|"
    r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
PRUNED_LAYERS = 30  # ComfyUI's file keeps the layers FLUX.2 reads


@dataclass(frozen=True)
class Flux2DevKit:
    root: Path
    diffusion_file: Path | None
    text_encoder_file: Path | None
    vae_file: Path | None
    diffusers_dir: Path | None
    loras: dict[str, Path] = field(default_factory=dict[str, Path])

    @property
    def written(self) -> list[Path]:
        paths = (self.diffusion_file, self.text_encoder_file, self.vae_file, self.diffusers_dir)
        return [p for p in paths if p is not None] + list(self.loras.values())


def tekken_json() -> bytes:
    """A tiny `tekken.json`: 256 byte tokens after Mistral's control tokens."""
    vocab = [
        {"rank": i, "token_bytes": base64.b64encode(bytes([i])).decode("ascii"), "token_str": None}
        for i in range(256)
    ]
    size = len(SPECIAL_TOKENS) + len(vocab)
    data = {
        "config": {
            "pattern": PATTERN,
            "num_vocab_tokens": size,
            "default_vocab_size": size,
            "default_num_special_tokens": len(SPECIAL_TOKENS),
            "version": "v7",
        },
        "vocab": vocab,
        "special_tokens": [
            {"rank": i, "token_str": token, "is_control": True}
            for i, token in enumerate(SPECIAL_TOKENS)
        ],
    }
    return json.dumps(data).encode("utf-8")


def mistral_tokenizer(tekken: bytes) -> Any:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "tekken.json"
        path.write_bytes(tekken)
        return mistral3.tekken_tokenizer(path)


def build_text_encoder(vocab_size: int, width: int = MISTRAL_WIDTH) -> Any:
    """A tiny `Mistral3ForConditionalGeneration` (the vision tower is never run for a prompt),
    `width` wide (a bench's mid-size stack widens it)."""
    lib = transformers()
    text = lib.MistralConfig(
        vocab_size=vocab_size,
        hidden_size=width,
        intermediate_size=width * 2,
        num_hidden_layers=MISTRAL_LAYERS,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=mistral3.HEAD_DIM,
        rms_norm_eps=mistral3.RMS_EPS,
        rope_parameters={"rope_theta": mistral3.ROPE_THETA, "rope_type": "default"},
        max_position_embeddings=mistral3.MAX_POSITIONS,
    )
    vision = lib.PixtralVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        head_dim=16,
        image_size=64,
        patch_size=16,
    )
    config = lib.Mistral3Config(
        text_config=text,
        vision_config=vision,
        image_token_index=SPECIAL_TOKENS.index("[IMG]"),
        spatial_merge_size=2,
        vision_feature_layer=-1,
    )
    seeded(SEEDS["text_encoder"])
    return lib.Mistral3ForConditionalGeneration(config).eval()


def build_dev_transformer(**overrides: Any) -> Any:
    """The tiny dev transformer; `overrides` change its config (a bench's mid-size stack)."""
    seeded(SEEDS["transformer"])
    return diffusers().Flux2Transformer2DModel(**(DEV_TRANSFORMER_CONFIG | overrides)).eval()


def build_dev_kit(out: Path, layouts: Sequence[str] = DEV_LAYOUTS) -> Flux2DevKit:
    """Write the dev kit into the models folder `out`; returns where each piece went."""
    quiet()
    tekken = tekken_json()
    tokenizer = mistral_tokenizer(tekken)
    text_encoder = build_text_encoder(len(tokenizer))
    transformer = build_dev_transformer()
    vae = build_vae()
    diffusion_file = text_encoder_file = vae_file = diffusers_dir = None
    loras = write_kit_loras(out, "flux2_dev_tiny", transformer)
    loras.update(write_turbo_loras(out, "flux2_dev_tiny", transformer))
    if "comfy" in layouts:
        diffusion_file = out / "diffusion_models" / "flux2_dev_tiny.safetensors"
        save_weights(to_original(transformer.state_dict()), diffusion_file, torch.float32)
        text_encoder_file = out / "text_encoders" / "mistral_3_small_flux2_tiny.safetensors"
        write_comfy_mistral(text_encoder, tekken, text_encoder_file)
        vae_file = write_comfy_vae(vae, out)
    if "diffusers" in layouts:
        diffusers_dir = out / "diffusion_models" / "flux2_dev_tiny_diffusers"
        diffusers().Flux2Pipeline(
            scheduler=build_scheduler(),
            vae=vae,
            text_encoder=text_encoder,
            tokenizer=tokenizer,
            transformer=transformer,
        ).save_pretrained(str(diffusers_dir))
    for category in ("diffusion_models", "vae", "text_encoders"):
        (out / category).mkdir(parents=True, exist_ok=True)
    return Flux2DevKit(out, diffusion_file, text_encoder_file, vae_file, diffusers_dir, loras)


def write_comfy_mistral(text_encoder: Any, tekken: bytes, path: Path) -> None:
    """The language model as ComfyUI's FLUX.2 file holds it: `model.`-prefixed, pruned to the
    layers FLUX.2 reads (its final norm with them), the tokenizer's bytes inside."""
    language = text_encoder.model.language_model.state_dict()
    kept = {
        f"model.{k}": v.detach().to(torch.float32).contiguous()
        for k, v in language.items()
        if k != "norm.weight"
        and not (k.startswith("layers.") and int(k.split(".")[1]) >= PRUNED_LAYERS)
    }
    kept[mistral3.TOKENIZER_KEY] = torch.frombuffer(bytearray(tekken), dtype=torch.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_safetensors(kept, path)
