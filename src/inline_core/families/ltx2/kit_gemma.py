"""A tiny LTX-2 stack whose Gemma 3 is also ComfyUI's single file (`text_encoders/`), offline.

ComfyUI's `gemma_3_12B_it*.safetensors` holds the language model under `model.`, the vision
tower and its projector beside it, and Gemma's SentencePiece model as uint8 bytes
(`spiece_model`). The kit trains a tiny SentencePiece BPE model (byte fallback, Gemma's special
pieces and ids) from a fixed text, makes the stack's tokenizer from it, and writes one models
folder holding the stack three ways: the diffusers folder (its tokenizer saved as transformers
saves it), ComfyUI's all-in-one file in `checkpoints/`, and the Gemma file in `text_encoders/`;
with Lightricks' latent upsampler file in `latent_upscale_models/`.
The file and the folder are one model: a render from either is the same.
"""

from __future__ import annotations

import importlib
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from inline_core.diffusion.kit import seeded
from inline_core.diffusion.libs import diffusers, save_safetensors, transformers
from inline_core.families.ltx2 import gemma_keys
from inline_core.families.ltx2.checkpoint_keys import PARTS
from inline_core.families.ltx2.gemma_tokenizer import from_spiece
from inline_core.families.ltx2.kit import SEEDS, build_upsampler, gemma3_config
from inline_core.families.ltx2.kit_single_file import (
    FILE,
    FOLDER,
    LIGHTRICKS_CONFIG,
    UPSAMPLER_FILE,
    build_single_file_parts,
    write_checkpoint,
    write_upsampler_file,
)

GEMMA_FILE = "gemma_3_12B_it_tiny.safetensors"  # in text_encoders/
VOCAB = 320  # 256 byte pieces, Gemma's four specials, its two turn markers, one unused, merges
CORPUS = (
    "a robot dancing in the rain",
    "a cat walks on the beach at sunset, waves crash on the rocks",
    "the quick brown fox jumps over the lazy dog",
    "a slow camera pan across a forest, birds sing, 24 frames a second",
    "dull, blurry, low quality",
)
# Beside the language model in ComfyUI's file: its SigLIP tower and projector (not read).
VISION = {"model.vision_tower.vision_model.": "vision_model.", "model.multi_modal_projector.": ""}


@dataclass(frozen=True)
class GemmaKit:
    root: Path
    checkpoint: Path  # checkpoints/ltx-2-tiny.safetensors
    gemma: Path  # text_encoders/gemma_3_12B_it_tiny.safetensors
    folder: Path  # the same stack as a diffusers folder
    spiece: bytes  # the SentencePiece model inside the Gemma file
    upsampler: Path  # latent_upscale_models/: Lightricks' spatial x2 file


def spiece_model() -> bytes:
    """A tiny SentencePiece BPE model with Gemma's ids: pad 0, eos 1, bos 2, unk 3."""
    spm: Any = importlib.import_module("sentencepiece")
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS * 20),
        model_writer=out,
        vocab_size=VOCAB,
        model_type="bpe",
        byte_fallback=True,
        pad_id=0,
        eos_id=1,
        bos_id=2,
        unk_id=3,
        pad_piece="<pad>",
        eos_piece="<eos>",
        bos_piece="<bos>",
        unk_piece="<unk>",
        control_symbols=["<start_of_turn>", "<end_of_turn>"],
        user_defined_symbols=["<unused0>"],
        add_dummy_prefix=False,
        remove_extra_whitespaces=False,
        normalization_rule_name="identity",
        split_digits=True,
        allow_whitespace_only_pieces=True,
        num_threads=1,
        minloglevel=2,
    )
    return out.getvalue()


def comfy_gemma_state(model: Any, spiece: bytes | None) -> dict[str, torch.Tensor]:
    """A `Gemma3ForConditionalGeneration`'s weights as ComfyUI's Gemma file holds them."""
    state: dict[str, torch.Tensor] = {}
    for key, value in model.state_dict().items():
        name = gemma_keys.from_diffusers(key)
        if name is None:
            prefix = next((p for p in VISION if key.startswith(p)), None)
            if prefix is None:
                continue  # lm_head: the embedding's, tied
            name = VISION[prefix] + key[len(prefix) :]
            name = name if name.startswith("vision_model.") else "multi_modal_projector." + name
        state[name] = value.detach().contiguous()
    if spiece is not None:
        state[gemma_keys.TOKENIZER_KEY] = torch.frombuffer(bytearray(spiece), dtype=torch.uint8)
    return state


def write_gemma_file(model: Any, path: Path, spiece: bytes | None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    save_safetensors(comfy_gemma_state(model, spiece), path)
    return path


def build_gemma_parts(spiece: bytes) -> dict[str, Any]:
    """The single-file kit's stack with the SentencePiece tokenizer and a Gemma of its vocab."""
    parts = build_single_file_parts()
    tokenizer = from_spiece(spiece)
    seeded(SEEDS["text_encoder"])
    encoder = transformers().Gemma3ForConditionalGeneration(gemma3_config(len(tokenizer) + 3))
    parts.update(text_encoder=encoder.eval(), tokenizer=tokenizer)
    return parts


def write_gemma_kit(out: Path) -> GemmaKit:
    """The stack as a diffusers folder, the all-in-one file and ComfyUI's Gemma file."""
    spiece = spiece_model()
    parts = build_gemma_parts(spiece)
    folder = out / "diffusion_models" / FOLDER
    diffusers().LTX2Pipeline(**parts).save_pretrained(str(folder))
    checkpoint = out / "checkpoints" / FILE
    weights = {part: dict(parts[part].state_dict()) for part in PARTS}
    write_checkpoint(checkpoint, weights, LIGHTRICKS_CONFIG)
    gemma = write_gemma_file(parts["text_encoder"], out / "text_encoders" / GEMMA_FILE, spiece)
    upsampler = write_upsampler_file(
        build_upsampler(), out / "latent_upscale_models" / UPSAMPLER_FILE
    )
    return GemmaKit(out, checkpoint, gemma, folder, spiece, upsampler)
