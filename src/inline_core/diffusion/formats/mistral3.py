"""Mistral Small 3 as a text encoder (FLUX.2 dev's): ComfyUI's `mistral_3_small_flux2*.safetensors`
(its language model alone, the tokenizer inside the file) or a diffusers `text_encoder` folder
(`Mistral3ForConditionalGeneration`, vision tower included): one format, torch-free at import.

Recognised from a safetensors header: Llama-style layers with no q/k norms (Qwen3's have them),
its `MistralConfig` inferred from shapes, its keys reduced to `MistralModel`'s. Head dim, rope
theta and norm eps are not visible in shapes: they are Mistral Small 3's.

ComfyUI prunes the model to the 30 layers FLUX.2 reads, without the final norm: the 31st hidden
state is then the last layer's raw output, as in the whole model. `final_norm` in the inferred
config says so, and `without_final_norm` makes the loaded model read that way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inline_core.diffusion.files.shapes import (
    ConfigInferenceError,
    Shapes,
    count_blocks,
    shape_of,
    strip_prefix,
)
from inline_core.diffusion.formats.format import ModelFormat

# ComfyUI's files name the language model `model.`; a whole Mistral3 checkpoint nests it.
PREFIXES = ("language_model.model.", "model.language_model.", "model.")
# Not language-model weights: the vision tower, its projector, the LM head, the tokenizer ComfyUI
# stores in the file (`tekken_model`, uint8 bytes of Mistral's `tekken.json`).
DROPPED = ("lm_head.", "vision_tower.", "multi_modal_projector.", "model.vision_tower.")
TOKENIZER_KEY = "tekken_model"
HEAD_DIM = 128  # Mistral Small 3's (its 32 heads of 128 are narrower than its 5120 width)
ROPE_THETA = 1_000_000_000.0
RMS_EPS = 1e-5
MAX_POSITIONS = 131_072
MODEL_TYPES = ("mistral3", "mistral")  # an HF folder's config.json `model_type`


def _language(shapes: Shapes) -> dict[str, tuple[int, ...]]:
    kept = {k: v for k, v in shapes.items() if not k.startswith(DROPPED) and k != TOKENIZER_KEY}
    return strip_prefix(kept, PREFIXES)[1]


def is_mistral(shapes: Shapes) -> bool:
    s = _language(shapes)
    return (
        "embed_tokens.weight" in s
        and "layers.0.self_attn.q_proj.weight" in s
        and "layers.0.self_attn.q_norm.weight" not in s
    )


def hidden_size(shapes: Shapes) -> int:
    return shape_of(_language(shapes), "embed_tokens.weight")[1]


def infer_config(shapes: Shapes) -> dict[str, Any]:
    """`MistralConfig` kwargs for a single-file Mistral language model."""
    s = _language(shapes)
    vocab_size, hidden = shape_of(s, "embed_tokens.weight")
    q_rows = shape_of(s, "layers.0.self_attn.q_proj.weight")[0]
    kv_rows = shape_of(s, "layers.0.self_attn.k_proj.weight")[0]
    if q_rows % HEAD_DIM or kv_rows % HEAD_DIM:
        raise ConfigInferenceError(f"projection widths are not multiples of head dim {HEAD_DIM}")
    return {
        "vocab_size": vocab_size,
        "hidden_size": hidden,
        "intermediate_size": shape_of(s, "layers.0.mlp.gate_proj.weight")[0],
        "num_hidden_layers": count_blocks(s, r"layers\.(\d+)\."),
        "num_attention_heads": q_rows // HEAD_DIM,
        "num_key_value_heads": kv_rows // HEAD_DIM,
        "head_dim": HEAD_DIM,
        "rms_norm_eps": RMS_EPS,
        "rope_parameters": {"rope_theta": ROPE_THETA, "rope_type": "default"},
        "max_position_embeddings": MAX_POSITIONS,
        "tie_word_embeddings": False,
        "final_norm": "norm.weight" in s,
    }


def from_single(sd: dict[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """A single file's language model -> `MistralModel` keys; a pruned file's missing final norm
    is filled with ones (`without_final_norm` takes it out of the way after loading)."""
    body = {k: v for k, v in sd.items() if not k.startswith(DROPPED) and k != TOKENIZER_KEY}
    prefix, _ = strip_prefix({k: tuple(v.shape) for k, v in body.items()}, PREFIXES)
    out = {k[len(prefix) :]: v for k, v in body.items()}
    if "norm.weight" not in out:
        embed = out["embed_tokens.weight"]
        out["norm.weight"] = embed.new_ones(int(config["hidden_size"]))
    return out


def without_final_norm(model: Any) -> Any:
    """A loaded pruned model whose last hidden state is its last layer's raw output (ComfyUI
    drops the final norm with the layers it prunes)."""
    if getattr(model.config, "final_norm", True) is False:
        import torch

        model.norm = torch.nn.Identity()
    return model


FORMAT = ModelFormat(
    what="text encoder",
    title="Mistral text encoder",
    library="transformers",
    class_name="MistralModel",
    recognize=is_mistral,
    infer_config=infer_config,
    convert=from_single,
    config_class="MistralConfig",
    folder_loader="AutoModel",
)
