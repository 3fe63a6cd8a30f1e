"""A decoder LM's config read from its shapes, as Mistral's and Qwen3's single files give them:
widths, depth and head counts from the shapes, the unseen constants as each format passes them,
and a head width that does not divide the projections refused by name."""

from __future__ import annotations

import pytest

from inline_core.diffusion.files.shapes import ConfigInferenceError
from inline_core.diffusion.formats import mistral3, qwen3
from inline_core.diffusion.formats.decoder_lm import decoder_lm_config


def config(head_dim: int) -> dict[str, object]:
    s = shapes("", 6, 2, 16, False)
    return decoder_lm_config(
        s, head_dim, rope_theta=1e4, rms_eps=1e-6, max_positions=512, tie_word_embeddings=True
    )


def shapes(
    prefix: str, heads: int, kv_heads: int, head_dim: int, qk_norm: bool
) -> dict[str, tuple[int, ...]]:
    s: dict[str, tuple[int, ...]] = {f"{prefix}embed_tokens.weight": (1000, 96)}
    for i in range(3):
        s[f"{prefix}layers.{i}.self_attn.q_proj.weight"] = (heads * head_dim, 96)
        s[f"{prefix}layers.{i}.self_attn.k_proj.weight"] = (kv_heads * head_dim, 96)
        s[f"{prefix}layers.{i}.mlp.gate_proj.weight"] = (160, 96)
        if qk_norm:
            s[f"{prefix}layers.{i}.self_attn.q_norm.weight"] = (head_dim,)
    s[f"{prefix}norm.weight"] = (96,)
    return s


def test_the_shapes_give_widths_depth_and_heads() -> None:
    assert config(16) == {
        "vocab_size": 1000,
        "hidden_size": 96,
        "intermediate_size": 160,
        "num_hidden_layers": 3,
        "num_attention_heads": 6,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "rms_norm_eps": 1e-6,
        "rope_parameters": {"rope_theta": 1e4, "rope_type": "default"},
        "max_position_embeddings": 512,
        "tie_word_embeddings": True,
    }


@pytest.mark.parametrize("head_dim", [0, 7])
def test_a_head_width_that_does_not_divide_is_refused(head_dim: int) -> None:
    with pytest.raises(ConfigInferenceError, match=f"head dim {head_dim}"):
        config(head_dim)


def test_both_formats_read_through_it_with_their_own_constants() -> None:
    mistral = mistral3.infer_config(shapes("model.", 4, 2, mistral3.HEAD_DIM, False))
    assert (mistral["num_attention_heads"], mistral["num_key_value_heads"]) == (4, 2)
    assert mistral["head_dim"] == mistral3.HEAD_DIM and mistral["final_norm"] is True
    assert mistral["rope_parameters"]["rope_theta"] == mistral3.ROPE_THETA
    assert mistral["tie_word_embeddings"] is False
    # Qwen3's head width is its q-norm's, not a constant.
    qwen = qwen3.infer_config(shapes("model.", 8, 4, 24, True))
    assert (qwen["head_dim"], qwen["num_attention_heads"], qwen["num_key_value_heads"]) == (
        24,
        8,
        4,
    )
    assert qwen["rms_norm_eps"] == qwen3.RMS_EPS and qwen["tie_word_embeddings"] is True
    assert qwen["attention_bias"] is False
