"""A decoder LM's config read from its shapes, as Mistral's, Qwen3's and Qwen3-VL's single files
give them: widths, depth and head counts from the shapes, the unseen constants as each format
passes them, and a head width that does not divide the projections refused by name."""

from __future__ import annotations

import pytest

from inline_core.diffusion.files.shapes import ConfigInferenceError
from inline_core.diffusion.formats import mistral3, qwen3, qwen3_vl
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


def qwen3_vl_shapes(head_dim: int = 16) -> dict[str, tuple[int, ...]]:
    """A ComfyUI-named Qwen3-VL: its language model under `model.` beside a two-block vision
    tower 32 wide (merge 2: its merger reads 4 x 32)."""
    s = shapes("model.", 4, 2, head_dim, True)
    s.update(
        {
            "visual.patch_embed.proj.weight": (32, 3, 2, 16, 16),
            "visual.blocks.0.mlp.linear_fc1.weight": (64, 32),
            "visual.blocks.1.mlp.linear_fc1.weight": (64, 32),
            "visual.merger.linear_fc1.weight": (128, 128),
            "visual.merger.linear_fc2.weight": (96, 128),
            "visual.pos_embed.weight": (16, 32),
        }
    )
    return s


def test_qwen3_vl_reads_its_language_model_through_it_with_its_multimodal_rope() -> None:
    config = qwen3_vl.infer_config(qwen3_vl_shapes())
    assert config["text_config"] == {
        "vocab_size": 1000,
        "hidden_size": 96,
        "intermediate_size": 160,
        "num_hidden_layers": 3,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "rms_norm_eps": qwen3_vl.RMS_EPS,
        "max_position_embeddings": qwen3_vl.MAX_POSITIONS,
        "tie_word_embeddings": True,
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": qwen3_vl.ROPE_THETA,
            "mrope_section": [4, 2, 2],  # (24, 20, 20) of 64, scaled to a 16-wide head
            "mrope_interleaved": True,
        },
    }
    assert config["vision_config"]["depth"] == 2
    assert config["vision_config"]["spatial_merge_size"] == 2


@pytest.mark.parametrize(
    "missing",
    [
        "embed_tokens.weight",
        "layers.0.self_attn.q_norm.weight",
        "layers.0.self_attn.q_proj.weight",
        "layers.0.self_attn.k_proj.weight",
        "layers.0.mlp.gate_proj.weight",
    ],
)
def test_a_missing_qwen3_vl_language_tensor_is_named_as_the_model_names_it(missing: str) -> None:
    s = qwen3_vl_shapes()
    del s[f"model.{missing}"]
    with pytest.raises(ConfigInferenceError, match=f"missing tensor 'language_model.{missing}'"):
        qwen3_vl.infer_config(s)


def test_a_qwen3_vl_q_norm_that_does_not_divide_its_projections_is_refused() -> None:
    s = qwen3_vl_shapes()
    s["model.layers.0.self_attn.q_norm.weight"] = (24,)
    with pytest.raises(ConfigInferenceError, match="head dim 24"):
        qwen3_vl.infer_config(s)
