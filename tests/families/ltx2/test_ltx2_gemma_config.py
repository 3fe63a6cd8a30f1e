"""The Gemma 3 file's config, read from its shapes through the shared decoder-LM reader
(`diffusion/formats/decoder_lm.py`) with what Gemma 3 passes of its own (its rope parameters by
layer type, window, query scale): for Gemma 3 12B's published shapes and the kit's it is the
config the family's own reader gave, and the config transformers builds from it is the same."""

from __future__ import annotations

from typing import Any

import pytest

from inline_core.diffusion.files.shapes import ConfigInferenceError
from inline_core.diffusion.libs import transformers
from inline_core.families.ltx2 import gemma_file

SLIDING = "sliding_attention"
ROPE = {
    SLIDING: {"rope_type": "default", "rope_theta": 10_000.0},
    "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1_000_000.0},
}


def shapes(vocab: int, hidden: int, mlp: int, layers: int, heads: int, kv: int, head: int) -> Any:
    s: dict[str, tuple[int, ...]] = {"embed_tokens.weight": (vocab, hidden)}
    for i in range(layers):
        s[f"layers.{i}.self_attn.q_norm.weight"] = (head,)
        s[f"layers.{i}.self_attn.q_proj.weight"] = (heads * head, hidden)
        s[f"layers.{i}.self_attn.k_proj.weight"] = (kv * head, hidden)
        s[f"layers.{i}.mlp.gate_proj.weight"] = (mlp, hidden)
    return s


def layer_types(layers: int) -> list[str]:
    return [SLIDING if (i + 1) % 6 else "full_attention" for i in range(layers)]


# What the family's own reader gave (before it read through decoder_lm), written out.
CASES = [
    (
        shapes(262_208, 3840, 15_360, 48, 16, 8, 256),  # Gemma 3 12B's published shapes
        {
            "vocab_size": 262_208,
            "hidden_size": 3840,
            "intermediate_size": 15_360,
            "num_hidden_layers": 48,
            "num_attention_heads": 16,
            "num_key_value_heads": 8,
            "head_dim": 256,
        },
    ),
    (
        shapes(323, 32, 32, 2, 2, 1, 8),  # the kit's
        {
            "vocab_size": 323,
            "hidden_size": 32,
            "intermediate_size": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 8,
        },
    ),
]


@pytest.mark.parametrize(("given", "seen"), CASES, ids=["12b", "kit"])
def test_the_config_is_the_one_the_family_s_reader_gave(given: Any, seen: dict[str, Any]) -> None:
    layers = seen["num_hidden_layers"]
    before = {
        **seen,
        "query_pre_attn_scalar": 256,
        "sliding_window": 1024,
        "layer_types": layer_types(layers),
        "rope_parameters": ROPE,
        "rms_norm_eps": 1e-6,
        "max_position_embeddings": 131_072,
        "hidden_activation": "gelu_pytorch_tanh",
    }
    got = gemma_file.infer_config(given)
    # Gemma 3 ties its embeddings: said now, where the config class's default said it before.
    assert got == {**before, "tie_word_embeddings": True}
    config_class = transformers().Gemma3TextConfig
    assert config_class(**got).to_dict() == config_class(**before).to_dict()


def test_a_head_width_that_does_not_divide_the_projections_is_refused() -> None:
    bad = shapes(323, 32, 32, 2, 2, 1, 8)
    bad["layers.0.self_attn.q_norm.weight"] = (7,)
    with pytest.raises(ConfigInferenceError, match="head dim 7"):
        gemma_file.infer_config(bad)
