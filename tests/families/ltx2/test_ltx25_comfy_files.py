"""ComfyUI's LTX-2.5 files told by their keys (`comfy_ltx25.py`, pinned from ComfyUI's
`comfy/sd.py` and `comfy/text_encoders/lt.py`), on tiny files holding those keys: each is named
for what it is, and an all-in-one LTX-2 file (its vocoder beside its transformer) is none of
them."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from inline_core.diffusion.libs import save_safetensors
from inline_core.errors import ModelMissing
from inline_core.families.ltx2 import gemma_keys
from inline_core.families.ltx2.comfy_ltx25 import ltx25_piece, refusal
from inline_core.families.ltx2.family import check_encoder_file
from inline_core.families.ltx2.files import encoder_problem
from inline_core.models.source import Source

PROJECTIONS = [
    f"text_embedding_projection.{stream}_aggregate_embed.{p}"
    for stream in ("video", "audio")
    for p in ("weight", "bias")
]
VOCODER = "vocoder.resblocks.0.convs1.0.weight"


def tiny(path: Path, *names: str) -> Path:
    save_safetensors({name: torch.zeros(2, 2) for name in names}, path)
    return path


@pytest.mark.parametrize(
    ("names", "said"),
    [
        (("model.layers.0.self_attn.q_proj.weight", *PROJECTIONS), "LTX-2.5 Gemma 4 file"),
        (("decoder.conv_in_x_t.weight", "decoder.conv_in.weight"), "diffusion video VAE"),
        (("audio_vae.decoder.conv_in.weight", VOCODER), "LTX audio VAE file"),
        (
            ("model.diffusion_model.proj_in.weight", "audio_vae.decoder.conv_in.weight", VOCODER),
            None,
        ),
        (("model.layers.0.self_attn.q_proj.weight",), None),
    ],
    ids=["gemma4-with-projections", "diffusion-vae", "audio-vae", "all-in-one", "other"],
)
def test_each_file_is_told_by_its_keys(
    tmp_path: Path, names: tuple[str, ...], said: str | None
) -> None:
    path = tiny(tmp_path / "file.safetensors", *names)
    piece = ltx25_piece(path)
    assert piece is None if said is None else said in str(piece)


def test_a_text_encoder_that_is_ltx25_s_gemma_4_file_is_refused_saying_so(tmp_path: Path) -> None:
    path = tiny(
        tmp_path / "encoder.safetensors", "model.layers.0.self_attn.q_proj.weight", *PROJECTIONS
    )
    problem = encoder_problem(path)
    assert problem is not None and problem == refusal(path)
    assert "LTX-2.5 Gemma 4 file" in problem and "diffusers folder" in problem
    other = tiny(tmp_path / "other.safetensors", "encoder.block.0.weight")
    assert (
        encoder_problem(other)
        == "it is not ComfyUI's Gemma 3 file (no Gemma 3 language model in it)"
    )


def test_ltx25_s_gemma_4_file_with_a_gemma_3_s_layer_keys_is_refused_as_itself(
    tmp_path: Path,
) -> None:
    # Gemma 4 has Gemma 3's embedding and q-normed layers (what tells a Gemma 3 file), so
    # the file ComfyUI ships is not told from Gemma 3 by those: its projections say what it is.
    path = tiny(
        tmp_path / "gemma.safetensors",
        "model.embed_tokens.weight",
        "model.norm.weight",
        "model.layers.0.self_attn.q_norm.weight",
        "model.layers.0.self_attn.q_proj.weight",
        *PROJECTIONS,
    )
    problem = encoder_problem(path)
    assert problem is not None and problem == refusal(path)


def test_ltx25_s_gemma_4_file_named_on_the_node_is_refused_not_read_as_gemma_3(
    tmp_path: Path,
) -> None:
    # Every key of a one-layer Gemma 3 under `model.`, and LTX-2.5's projections beside it.
    names = [f"model.{key}" for key in gemma_keys.text_model_keys(1)]
    path = tiny(tmp_path / "gemma.safetensors", *names, *PROJECTIONS)
    with pytest.raises(ModelMissing) as refused:
        check_encoder_file(Source(path=path), "7")
    assert refused.value.message.endswith(str(refusal(path))), refused.value.message
