"""Tiny random-weight FLUX.2 dev models, written into a models folder (`kit.py` runs it too).

FLUX.2 dev is klein's transformer with a guidance embedder, read by a Mistral Small 3 (a
`Mistral3ForConditionalGeneration`: a language model and a vision tower). The kit builds:

- a dev transformer shaped as klein's tiny one, with its guidance embedder and a text input three
  Mistral widths wide;
- a tiny Mistral3 (32 layers, so the three FLUX.2 reads, 10, 20 and 30, sit inside it) with a
  byte-level tokenizer carrying Mistral's control tokens and a chat template that writes a system
  message and a prompt as Mistral Small 3's does;
- FLUX.2's VAE (klein's kit's).

Diffusers layout: `diffusion_models/flux2_dev_tiny_diffusers/` (`Flux2Pipeline`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inline_core.diffusion.formats import mistral3
from inline_core.diffusion.kit import byte_tokenizer, seeded
from inline_core.diffusion.libs import diffusers, quiet, transformers
from inline_core.families.flux2.kit import TRANSFORMER_CONFIG, build_scheduler, build_vae

DEV_LAYOUTS = ("diffusers",)  # the layouts written so far; others asked for are skipped
MISTRAL_WIDTH = 32  # as wide as klein's tiny Qwen3: only the variant tells which one fits
MISTRAL_LAYERS = 32
DEV_TRANSFORMER_CONFIG: dict[str, Any] = {
    **TRANSFORMER_CONFIG,
    "joint_attention_dim": MISTRAL_WIDTH * 3,
    "guidance_embeds": True,
}
SEEDS = {"text_encoder": 31, "transformer": 32}
BOS, EOS, PAD = "<s>", "</s>", "<pad>"
IMAGE_TOKEN = "[IMG]"
SPECIAL_TOKENS = (
    "<unk>",
    BOS,
    EOS,
    "[INST]",
    "[/INST]",
    "[SYSTEM_PROMPT]",
    "[/SYSTEM_PROMPT]",
    PAD,
    IMAGE_TOKEN,
)
# Mistral Small 3's template reduced to what a system message and a user prompt (a string or
# diffusers' list of text parts) use.
CHAT_TEMPLATE = (
    "{{- bos_token }}"
    "{%- for message in messages %}"
    "{%- if message['content'] is string %}{%- set text = message['content'] %}"
    "{%- else %}{%- set text = message['content'] | selectattr('type', 'equalto', 'text') "
    "| map(attribute='text') | join('') %}{%- endif %}"
    "{%- if message['role'] == 'system' %}{{- '[SYSTEM_PROMPT]' + text + '[/SYSTEM_PROMPT]' }}"
    "{%- elif message['role'] == 'user' %}{{- '[INST]' + text + '[/INST]' }}"
    "{%- else %}{{- text + eos_token }}{%- endif %}"
    "{%- endfor %}"
)


@dataclass(frozen=True)
class Flux2DevKit:
    root: Path
    diffusers_dir: Path | None

    @property
    def written(self) -> list[Path]:
        return [p for p in (self.diffusers_dir,) if p is not None]


def mistral_tokenizer() -> Any:
    tokenizer = byte_tokenizer(
        SPECIAL_TOKENS, pad_token=PAD, eos_token=EOS, chat_template=CHAT_TEMPLATE
    )
    tokenizer.bos_token = BOS
    return tokenizer


def build_text_encoder(vocab_size: int) -> Any:
    """A tiny `Mistral3ForConditionalGeneration` (the vision tower is never run for a prompt)."""
    lib = transformers()
    text = lib.MistralConfig(
        vocab_size=vocab_size,
        hidden_size=MISTRAL_WIDTH,
        intermediate_size=MISTRAL_WIDTH * 2,
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
        image_token_index=vocab_size - 1,
        spatial_merge_size=2,
        vision_feature_layer=-1,
    )
    seeded(SEEDS["text_encoder"])
    return lib.Mistral3ForConditionalGeneration(config).eval()


def build_dev_transformer() -> Any:
    seeded(SEEDS["transformer"])
    return diffusers().Flux2Transformer2DModel(**DEV_TRANSFORMER_CONFIG).eval()


def build_dev_kit(out: Path, layouts: Sequence[str] = DEV_LAYOUTS) -> Flux2DevKit:
    """Write the dev kit into the models folder `out`; returns where each piece went."""
    quiet()
    tokenizer = mistral_tokenizer()
    text_encoder = build_text_encoder(len(tokenizer))
    transformer = build_dev_transformer()
    vae = build_vae()
    diffusers_dir = None
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
    return Flux2DevKit(out, diffusers_dir)
