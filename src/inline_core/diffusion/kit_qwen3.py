"""A tiny Qwen3 text encoder for the kits of the families that read one (imports torch): a
byte-level BPE with Qwen3's special tokens and a chat template reduced to what a one-message
prompt uses (`enable_thinking` included), and a small `Qwen3Config`."""

from __future__ import annotations

from typing import Any

from inline_core.diffusion.formats import qwen3
from inline_core.diffusion.kit import byte_tokenizer
from inline_core.diffusion.libs import transformers

CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}"
)
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>")


def qwen3_tokenizer() -> Any:
    return byte_tokenizer(
        SPECIAL_TOKENS,
        pad_token="<|endoftext|>",
        eos_token="<|im_end|>",
        chat_template=CHAT_TEMPLATE,
    )


def tiny_qwen3_config(vocab_size: int, hidden_size: int, layers: int = 2) -> Any:
    return transformers().Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        rms_norm_eps=qwen3.RMS_EPS,
        rope_parameters={"rope_theta": qwen3.ROPE_THETA, "rope_type": "default"},
        max_position_embeddings=qwen3.MAX_POSITIONS,
        tie_word_embeddings=True,
    )
