"""The Gemma 3 text encoder in ComfyUI's file (`text_encoders/gemma_3_12B_it*.safetensors`, what
`LTXAVTextEncoderLoader` reads) against transformers' `Gemma3ForConditionalGeneration` naming
(torch-free). ComfyUI's `Gemma3_12B` keeps the language model at the top (`model.layers.*`,
`model.embed_tokens`, `model.norm`: ComfyUI's loader tells the file by
`model.layers.47.self_attn.q_norm.weight`), where transformers nests it in
`model.language_model.`; the layers' own names are the same. LTX-2 reads the language model's
hidden states alone. The file's SigLIP tower (`vision_model.`) and its projector
(`multi_modal_projector.`) are not mapped here; its SentencePiece model (`spiece_model`, uint8
bytes of Gemma's `tokenizer.model`) is the tokenizer (`gemma_tokenizer.py`).

A loaded file is read as a view of it under `COMFY_PREFIX`: the prefix cut, the keys are
transformers' `Gemma3TextModel`'s (`LAYER_KEYS` in every layer, `TOP_KEYS`)."""

from __future__ import annotations

COMFY_PREFIX = "model."
DIFFUSERS_PREFIX = "model.language_model."
PROBE = "self_attn.q_norm.weight"  # every layer has one; ComfyUI's loader probes layer 47's
TOKENIZER_KEY = "spiece_model"
TOP_KEYS = ("embed_tokens.weight", "norm.weight")
LAYER_KEYS = (
    "input_layernorm.weight",
    "post_attention_layernorm.weight",
    "pre_feedforward_layernorm.weight",
    "post_feedforward_layernorm.weight",
    "self_attn.q_proj.weight",
    "self_attn.k_proj.weight",
    "self_attn.v_proj.weight",
    "self_attn.o_proj.weight",
    "self_attn.q_norm.weight",
    "self_attn.k_norm.weight",
    "mlp.gate_proj.weight",
    "mlp.up_proj.weight",
    "mlp.down_proj.weight",
)


def to_diffusers(key: str) -> str | None:
    """A ComfyUI Gemma key as transformers' (None: not the language model's)."""
    if not key.startswith(COMFY_PREFIX):
        return None
    return DIFFUSERS_PREFIX + key[len(COMFY_PREFIX) :]


def from_diffusers(key: str) -> str | None:
    """A transformers language-model key as ComfyUI's file names it (None: another part's, e.g.
    the vision tower's, or `lm_head`, which shares the embedding's weights)."""
    if not key.startswith(DIFFUSERS_PREFIX):
        return None
    return COMFY_PREFIX + key[len(DIFFUSERS_PREFIX) :]


def is_comfy_gemma(keys: set[str]) -> bool:
    """Whether a file's keys are ComfyUI's Gemma 3 (its language model at the top, q/k-normed)."""
    return (
        f"{COMFY_PREFIX}layers.0.{PROBE}" in keys and f"{COMFY_PREFIX}embed_tokens.weight" in keys
    )


def text_model_keys(layers: int) -> list[str]:
    """Every key of a `Gemma3TextModel` of this many layers (the view's, the prefix cut)."""
    return [*TOP_KEYS, *(f"layers.{i}.{key}" for i in range(layers) for key in LAYER_KEYS)]
