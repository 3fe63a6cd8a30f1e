"""ComfyUI's LTX-2.5 files told by their keys (`comfy_ltx25.py`, pinned from ComfyUI's
`comfy/sd.py` and `comfy/text_encoders/lt.py`), on tiny files holding those keys: each is named
for what it is, and an all-in-one LTX-2 file (its vocoder beside its transformer) is none of
them."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from inline_core.diffusion.libs import save_safetensors
from inline_core.families.ltx2.comfy_ltx25 import ltx25_piece, refusal
from inline_core.families.ltx2.files import encoder_problem

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
