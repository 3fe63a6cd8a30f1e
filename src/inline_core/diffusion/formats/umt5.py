"""UMT5 as a text encoder (ComfyUI's `umt5_xxl_*.safetensors`, or an HF folder): one format.

Recognised from a safetensors header (torch-free), its `UMT5Config` inferred from tensor shapes
(UMT5 keeps a relative attention bias in every layer, whose width is the head count), and its keys
reduced to `UMT5EncoderModel`'s. A single file carries no tokenizer: a family pairs it with a
tokenizer folder of its own (see `contract/files.TokenizerRule.folder`).
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

PREFIXES = ("text_encoders.umt5xxl.transformer.", "umt5xxl.transformer.", "transformer.")
MODEL_TYPE = "umt5"  # an HF folder's config.json `model_type`
BIAS = "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"
SECOND_BIAS = BIAS.replace("block.0.", "block.1.")
EMBED, TIED = "shared.weight", "encoder.embed_tokens.weight"
# UMT5 constants that are not visible in shapes (umt5-xxl's; the kit uses the same).
MAX_DISTANCE = 128
EPS = 1e-6


def _body(shapes: Shapes) -> dict[str, tuple[int, ...]]:
    _prefix, s = strip_prefix(shapes, PREFIXES)
    return s


def is_umt5(shapes: Shapes) -> bool:
    s = _body(shapes)
    # T5 keeps the bias in its first layer only; UMT5 in every one.
    has_embed = EMBED in s or TIED in s
    return has_embed and BIAS in s and SECOND_BIAS in s


def hidden_size(shapes: Shapes) -> int:
    return shape_of(_body(shapes), EMBED, TIED)[1]


def infer_config(shapes: Shapes) -> dict[str, Any]:
    """`UMT5Config` kwargs for a single-file UMT5 encoder."""
    s = _body(shapes)
    vocab_size, d_model = shape_of(s, EMBED, TIED)
    buckets, heads = shape_of(s, BIAS)
    q_rows = shape_of(s, "encoder.block.0.layer.0.SelfAttention.q.weight")[0]
    if q_rows % heads:
        raise ConfigInferenceError(f"query width {q_rows} is not a multiple of {heads} heads")
    gated = "encoder.block.0.layer.1.DenseReluDense.wi_0.weight" in s
    d_ff = shape_of(
        s,
        "encoder.block.0.layer.1.DenseReluDense.wi_0.weight",
        "encoder.block.0.layer.1.DenseReluDense.wi.weight",
    )[0]
    return {
        "vocab_size": vocab_size,
        "d_model": d_model,
        "d_kv": q_rows // heads,
        "d_ff": d_ff,
        "num_layers": count_blocks(s, r"encoder\.block\.(\d+)\."),
        "num_heads": heads,
        "relative_attention_num_buckets": buckets,
        "relative_attention_max_distance": MAX_DISTANCE,
        "feed_forward_proj": "gated-gelu" if gated else "relu",
        "layer_norm_epsilon": EPS,
        "is_encoder_decoder": False,
        "use_cache": False,
    }


def from_single(sd: dict[str, Any], _config: Mapping[str, Any]) -> dict[str, Any]:
    """A single file's keys (prefixed or bare, embedding under either name) ->
    `UMT5EncoderModel`'s, both embedding names present (they are tied)."""
    prefix, _ = strip_prefix({k: tuple(v.shape) for k, v in sd.items()}, PREFIXES)
    # The encoder's tensors only: a file may also hold a decoder, an LM head or extras (e.g. a
    # tokenizer stored as a tensor), none of which the encoder takes.
    cut = {k[len(prefix) :]: v for k, v in sd.items()}
    out = {k: v for k, v in cut.items() if k == EMBED or k.startswith("encoder.")}
    if EMBED not in out and TIED in out:
        out[EMBED] = out[TIED]
    if TIED not in out and EMBED in out:
        out[TIED] = out[EMBED]
    return out


FORMAT = ModelFormat(
    what="text encoder",
    title="UMT5 text encoder",
    library="transformers",
    class_name="UMT5EncoderModel",
    recognize=is_umt5,
    infer_config=infer_config,
    convert=from_single,
    config_class="UMT5Config",
    # Its feed-forward casts its input to `wo`'s weight dtype (transformers keeps `wo` in float32).
    computed_at_load=("wo",),
)
