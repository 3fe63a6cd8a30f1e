"""The text encoder rule Wan, Qwen-Image, Krea 2 and Z-Image share (`contract/encoder_width.py`):
a folder by its config's `model_type`, a single file by its header, either ruled out when the
transformer found wants another width, and the family's own name ranked first."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from inline_core.contract.files import Score
from inline_core.families.krea2 import files as krea2
from inline_core.families.qwen_image import files as qwen_image
from inline_core.families.wan import files as wan
from inline_core.families.zimage import files as zimage
from inline_core.models.catalog import CatalogEntry
from inline_core.models.source import Source

Shapes = dict[str, tuple[int, ...]]


def umt5(width: int) -> Shapes:
    bias = "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"
    return {"shared.weight": (100, width), bias: (32, 2), bias.replace(".0.", ".1.", 1): (32, 2)}


def qwen25_vl(width: int) -> Shapes:
    return {
        "model.embed_tokens.weight": (100, width),
        "model.layers.0.self_attn.q_proj.bias": (width,),
        "visual.patch_embed.proj.weight": (8, 3, 2, 14, 14),
        "visual.merger.ln_q.weight": (8,),
    }


def qwen3_vl(width: int) -> Shapes:
    return {
        "model.embed_tokens.weight": (100, width),
        "model.layers.0.self_attn.q_norm.weight": (16,),
        "visual.patch_embed.proj.weight": (8, 3, 2, 16, 16),
        "visual.merger.linear_fc1.weight": (32, 32),
    }


def qwen3(width: int) -> Shapes:
    return {
        "model.embed_tokens.weight": (100, width),
        "model.layers.0.self_attn.q_norm.weight": (16,),
    }


# family: (its score, a single file's shapes at a width, a folder's config at a width, the
# transformer config key of its text width, a name it ranks first)
FAMILIES: dict[str, tuple[Score, Callable[[int], Shapes], Callable[[int], Any], str, str]] = {
    "wan": (
        wan.encoder_score,
        umt5,
        lambda w: {"model_type": "umt5", "d_model": w},
        "text_dim",
        "umt5",
    ),
    "qwen-image": (
        qwen_image.encoder_score,
        qwen25_vl,
        lambda w: {"model_type": "qwen2_5_vl", "text_config": {"hidden_size": w}},
        "joint_attention_dim",
        "qwen",
    ),
    "krea-2": (
        krea2.encoder_score,
        qwen3_vl,
        lambda w: {"model_type": "qwen3_vl", "text_config": {"hidden_size": w}},
        "text_hidden_dim",
        "qwen",
    ),
    "z-image": (
        zimage.encoder_score,
        qwen3,
        lambda w: {"model_type": "qwen3", "hidden_size": w},
        "cap_feat_dim",
        "qwen",
    ),
}


def header_file(path: Path, shapes: Shapes) -> Path:
    """A safetensors file that is its header alone: all a score reads."""
    header = {
        k: {"dtype": "F32", "shape": list(v), "data_offsets": [0, 0]} for k, v in shapes.items()
    }
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)
    return path


def folder(path: Path, config: Any) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps(config))
    return path


def entry(path: Path) -> CatalogEntry:
    name = path.name
    return CatalogEntry("text_encoders", name, path, path.is_dir(), 1, 1)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_an_encoder_is_kept_at_the_transformers_width_with_its_name_first(
    family: str, tmp_path: Path
) -> None:
    score, file_shapes, folder_config, width_key, own_name = FAMILIES[family]
    wants_64 = Source(folder(tmp_path / "transformer", {width_key: 64}))
    wants_48 = Source(folder(tmp_path / "transformer48", {width_key: 48}))
    single = entry(header_file(tmp_path / "te.safetensors", file_shapes(64)))
    named = entry(header_file(tmp_path / f"{own_name}_te.safetensors", file_shapes(64)))
    hf = entry(folder(tmp_path / "te_folder", folder_config(64)))
    assert [score(e, wants_64) for e in (single, named, hf)] == [0, 1, 0]
    assert [score(e, wants_48) for e in (single, named, hf)] == [None, None, None]
    assert [score(e, None) for e in (single, named, hf)] == [0, 1, 0]  # no transformer: any width


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_another_models_file_or_folder_is_not_an_encoder(family: str, tmp_path: Path) -> None:
    score = FAMILIES[family][0]
    foreign = entry(header_file(tmp_path / "qwen_other.safetensors", {"foo.weight": (3, 3)}))
    bert = entry(folder(tmp_path / "qwen_bert", {"model_type": "bert", "hidden_size": 64}))
    assert (score(foreign, None), score(bert, None)) == (None, None)


def test_z_image_keeps_an_unreadable_file_its_name_claims_and_no_other(tmp_path: Path) -> None:
    junk = tmp_path / "qwen_3_4b.safetensors"
    junk.write_bytes(b"not a header")
    other = tmp_path / "te.safetensors"
    other.write_bytes(b"not a header")
    assert (zimage.encoder_score(entry(junk), None), zimage.encoder_score(entry(other), None)) == (
        1,
        None,
    )
    assert wan.encoder_score(entry(junk), None) is None  # the others rule it out
