"""ComfyUI's all-in-one LTX-2 checkpoint names its vocoder and text connectors as Lightricks'
code does; diffusers' single-file loader converts its transformer and VAEs but not these two, so
the family maps their keys itself. Round trip on the tiny kit: the diffusers folder's weights,
named as the checkpoint names them and mapped back, load strictly into diffusers' classes and
compute exactly what the folder's do."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from inline_core.diffusion.libs import module
from inline_core.families.ltx2 import connector_keys, vocoder_keys
from inline_core.families.ltx2.kit import LTX2Kit

LTX2: Any = module("diffusers.pipelines.ltx2")


def round_trip(model: Any, keys: Any) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The model's weights as the checkpoint names them, and mapped back."""
    checkpoint = {keys.from_diffusers(k): v for k, v in model.state_dict().items()}
    back: dict[str, torch.Tensor] = {}
    for key, value in checkpoint.items():
        name = keys.to_diffusers(key)
        assert name is not None, key
        back[name] = value
    return checkpoint, back


@pytest.fixture(scope="module")
def folder(ltx2_kit: LTX2Kit) -> Any:
    return ltx2_kit.diffusers_dir


def test_the_vocoder_round_trips_through_the_checkpoint_s_names(folder: Any) -> None:
    vocoder: Any = LTX2.LTX2Vocoder.from_pretrained(str(folder), subfolder="vocoder").eval()
    checkpoint, back = round_trip(vocoder, vocoder_keys)
    assert all(k.startswith("vocoder.") for k in checkpoint)
    assert {"vocoder.conv_pre.weight", "vocoder.conv_post.weight"} <= set(checkpoint)
    assert any(k.startswith("vocoder.ups.0.") for k in checkpoint)
    assert any(k.startswith("vocoder.resblocks.0.") for k in checkpoint)
    assert vocoder_keys.to_diffusers("vae.decoder.conv_in.weight") is None
    loaded: Any = LTX2.LTX2Vocoder.from_config(vocoder.config).eval()
    loaded.load_state_dict(back, strict=True)
    mel = torch.randn(1, 2, 6, 8, generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        got: torch.Tensor = loaded(mel)
        want: torch.Tensor = vocoder(mel)
        assert torch.equal(got, want)


def test_the_connectors_round_trip_through_the_checkpoint_s_names(folder: Any) -> None:
    connectors: Any = LTX2.LTX2TextConnectors.from_pretrained(
        str(folder), subfolder="connectors"
    ).eval()
    checkpoint, back = round_trip(connectors, connector_keys)
    assert "text_embedding_projection.aggregate_embed.weight" in checkpoint
    video = "model.diffusion_model.video_embeddings_connector.transformer_1d_blocks.0.attn1."
    assert video + "q_norm.weight" in checkpoint and video + "k_norm.weight" in checkpoint
    assert any(
        k.startswith("model.diffusion_model.audio_embeddings_connector.") for k in checkpoint
    )
    # The diffusion model's own keys are not the connectors'.
    assert connector_keys.to_diffusers("model.diffusion_model.patchify_proj.weight") is None
    loaded: Any = LTX2.LTX2TextConnectors.from_config(connectors.config).eval()
    loaded.load_state_dict(back, strict=True)
    states = torch.randn(1, 16, 32 * 3, generator=torch.Generator().manual_seed(1))
    mask = torch.ones(1, 16, dtype=torch.long)
    with torch.inference_mode():
        outputs: list[tuple[torch.Tensor, torch.Tensor]] = list(
            zip(loaded(states, mask), connectors(states, mask), strict=True)
        )
    assert all(torch.equal(got, want) for got, want in outputs)
