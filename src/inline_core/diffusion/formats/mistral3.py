"""Mistral Small 3 as a text encoder (FLUX.2 dev's): ComfyUI's `mistral_3_small_flux2*.safetensors`
(its language model alone, the tokenizer inside the file) or a diffusers `text_encoder` folder
(`Mistral3ForConditionalGeneration`, vision tower included): one format, torch-free at import.

Recognised from a safetensors header: Llama-style layers with no q/k norms (Qwen3's have them),
its `MistralConfig` inferred from shapes, its keys reduced to `MistralModel`'s. Head dim, rope
theta and norm eps are not visible in shapes: they are Mistral Small 3's.

ComfyUI prunes the model to the 30 layers FLUX.2 reads, without the final norm: the 31st hidden
state is then the last layer's raw output, as in the whole model. `final_norm` in the inferred
config says so, and `without_final_norm` makes the loaded model read that way.

ComfyUI's file carries Mistral's tokenizer (`tekken.json`'s bytes as a uint8 tensor):
`embedded_tokenizer` converts it with transformers' own tekken converter. A file has no chat
template: the one given is Mistral Small 3's for a system message and user prompts (what
ComfyUI writes around a FLUX.2 prompt), and prompts are padded on the left, as BFL's encoder
and ComfyUI pad them. A folder's tokenizer without a template of its own gets the same one.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from inline_core.diffusion.files.shapes import Shapes, shape_of, strip_prefix
from inline_core.diffusion.formats.decoder_lm import decoder_lm_config
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
PADDING_SIDE = "left"
CONTROL_TOKENS = ("[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[INST]", "[/INST]")  # its template's
# Mistral Small 3's chat template reduced to what a system message and user prompts use (a
# string, or diffusers' list of text parts):
# `<s>[SYSTEM_PROMPT]...[/SYSTEM_PROMPT][INST]...[/INST]`.
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
    config = decoder_lm_config(
        s,
        HEAD_DIM,
        rope_theta=ROPE_THETA,
        rms_eps=RMS_EPS,
        max_positions=MAX_POSITIONS,
        tie_word_embeddings=False,
    )
    return {**config, "final_norm": "norm.weight" in s}


def from_single(sd: dict[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """A single file's language model -> `MistralModel` keys; a pruned file's missing final norm
    is filled with ones (`without_final_norm` takes it out of the way after loading)."""
    body = {k: v for k, v in sd.items() if not k.startswith(DROPPED) and k != TOKENIZER_KEY}
    prefix, _ = strip_prefix({k: tuple(v.shape) for k, v in body.items()}, PREFIXES)
    out = {k[len(prefix) :]: v for k, v in body.items()}
    if "norm.weight" not in out:
        import torch

        # float32, never a stored fp8 embedding's dtype: it is replaced after loading anyway
        out["norm.weight"] = torch.ones(int(config["hidden_size"]), dtype=torch.float32)
    return out


def carries_tokenizer(shapes: Shapes) -> bool:
    """Whether a single file holds its tokenizer (ComfyUI's do)."""
    return TOKENIZER_KEY in shapes


def tekken_tokenizer(tekken: Path) -> Any:
    """An HF tokenizer from Mistral's `tekken.json`, with the chat template and padding side
    FLUX.2 reads its prompts with."""
    from transformers.integrations.mistral.tokenizer import convert_tekken_tokenizer

    tokenizer = cast(Any, convert_tekken_tokenizer(str(tekken), chat_template=CHAT_TEMPLATE))
    tokenizer.padding_side = PADDING_SIDE
    tokenizer.init_kwargs["padding_side"] = PADDING_SIDE  # kept when it is saved
    return tokenizer


def templated(tokenizer: Any) -> Any | None:
    """A Mistral tokenizer (its control tokens known) without a chat template, given Mistral
    Small 3's; None for another tokenizer (it has no template this format knows)."""
    vocab = cast(dict[str, int], tokenizer.get_vocab())
    if not all(token in vocab for token in CONTROL_TOKENS):
        return None
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def embedded_tokenizer(path: Path) -> Any:
    """The tokenizer a single file carries (`carries_tokenizer`)."""
    import safetensors

    with cast(Any, safetensors).safe_open(str(path), framework="numpy") as f:
        data = bytes(f.get_tensor(TOKENIZER_KEY).tobytes())
    with tempfile.TemporaryDirectory() as folder:
        tekken = Path(folder) / "tekken.json"
        tekken.write_bytes(data)
        return tekken_tokenizer(tekken)


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
