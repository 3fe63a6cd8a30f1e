"""The Gemma 3 text encoder in ComfyUI's file (`text_encoders/gemma_3_12B_it*.safetensors`, what
`LTXAVTextEncoderLoader` reads) against transformers' `Gemma3ForConditionalGeneration` naming
(torch-free). ComfyUI's `Gemma3_12B` keeps the language model at the top (`model.layers.*`,
`model.embed_tokens`, `model.norm`: ComfyUI's loader tells the file by
`model.layers.47.self_attn.q_norm.weight`), where transformers nests it in
`model.language_model.`; the layers' own names are the same. LTX-2 reads the language model's
hidden states alone. The file's SigLIP tower (`vision_model.`), its projector
(`multi_modal_projector.`) and its SentencePiece model (`spiece_model`) are not mapped here."""

from __future__ import annotations

COMFY_PREFIX = "model."
DIFFUSERS_PREFIX = "model.language_model."
PROBE = "self_attn.q_norm.weight"  # every layer has one; ComfyUI's loader probes layer 47's


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
