"""The family's one map of LTX-2's all-in-one checkpoint (`checkpoint_keys.py`), on a tiny file
the test writes: the kit's weights under the checkpoint's names, beside the two VAE statistics
no diffusers class holds. Read back by its header's keys, every part is the kit's weights in
diffusers layout, tensor for tensor; where diffusers' own single-file converters are right (the
transformer, a four-block video VAE, the audio VAE) they name every key as the family does, and
where they are not (LTX-2.3's `prompt_adaln_single`, issue #14145) the family's map still
holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from inline_core.diffusion.files.header import HEADERS
from inline_core.diffusion.libs import load_safetensors, module, save_safetensors
from inline_core.families.ltx2 import checkpoint_keys
from inline_core.families.ltx2.checkpoint_keys import split, to_checkpoint
from inline_core.families.ltx2.kit import LTX2Kit, build_parts
from inline_core.families.ltx2.kit_single_file import write_checkpoint as write_all_in_one

SINGLE_FILE: Any = module("diffusers.loaders.single_file_utils")
# LTX-2.0's video VAE layout (four down blocks, three up), at a tiny width.
FOUR_BLOCK_VAE: dict[str, Any] = {
    "in_channels": 3,
    "out_channels": 3,
    "latent_channels": 8,
    "block_out_channels": (8, 8, 8, 8),
    "decoder_block_out_channels": (8, 8, 8),
    "layers_per_block": (1, 1, 1, 1, 1),
    "decoder_layers_per_block": (1, 1, 1, 1),
    "spatio_temporal_scaling": (True, True, True, True),
    "decoder_spatio_temporal_scaling": (True, True, True),
    "decoder_inject_noise": (False, False, False, False),
    "downsample_type": ("spatial", "temporal", "spatiotemporal", "spatiotemporal"),
    "upsample_residual": (True, True, True),
    "upsample_factor": (2, 2, 2),
    "patch_size": 4,
    "patch_size_t": 1,
}
PARTS = ("transformer", "connectors", "vae", "audio_vae", "vocoder")


def states(parts: dict[str, Any]) -> dict[str, dict[str, torch.Tensor]]:
    return {part: dict(parts[part].state_dict()) for part in PARTS}


def write_checkpoint(path: Path, weights: dict[str, dict[str, torch.Tensor]]) -> None:
    """The kit's writer, with a key of no part beside the parts' (not read)."""
    write_all_in_one(path, weights, None)
    state = load_safetensors(path)
    state["duration_head.weight"] = torch.ones(2)
    save_safetensors(state, path)


def read_parts(path: Path) -> dict[str, dict[str, torch.Tensor]]:
    """Each part's weights in diffusers layout, mapped from the header's keys alone."""
    names = split(HEADERS.get(path))
    file = load_safetensors(path)
    return {part: {name: file[key] for key, name in m.items()} for part, m in names.items()}


def assert_same(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> None:
    assert sorted(got) == sorted(want)
    for key, value in want.items():
        assert torch.equal(got[key], value), key


@pytest.fixture(scope="module")
def kit_weights(ltx2_kit: LTX2Kit) -> dict[str, dict[str, torch.Tensor]]:
    del ltx2_kit  # the kit's parts, from their fixed seeds
    return states(build_parts())


def test_every_part_reads_back_as_the_kit_s_weights(
    kit_weights: dict[str, dict[str, torch.Tensor]], tmp_path: Path
) -> None:
    path = tmp_path / "checkpoints" / "ltx-2-tiny.safetensors"
    write_checkpoint(path, kit_weights)
    keys = set(HEADERS.get(path))
    assert "model.diffusion_model.patchify_proj.weight" in keys
    assert "model.diffusion_model.adaln_single.linear.weight" in keys
    assert "vae.per_channel_statistics.mean-of-means" in keys
    assert "text_embedding_projection.aggregate_embed.weight" in keys
    assert any(k.startswith("vae.encoder.down_blocks.2.res_blocks.") for k in keys)  # its mid
    read = read_parts(path)
    for part in PARTS:
        assert_same(read[part], kit_weights[part])


def test_diffusers_converters_name_the_transformer_and_both_vaes_as_the_family_does(
    kit_weights: dict[str, dict[str, torch.Tensor]], tmp_path: Path
) -> None:
    lib: Any = module("diffusers")
    torch.manual_seed(0)  # pyright: ignore[reportUnknownMemberType]
    weights = {
        **kit_weights,
        "vae": dict(lib.AutoencoderKLLTX2Video(**FOUR_BLOCK_VAE).state_dict()),
    }
    path = tmp_path / "ltx-2-four-blocks.safetensors"
    write_checkpoint(path, weights)
    file = load_safetensors(path)
    ours = read_parts(path)
    transformer = {k: v for k, v in file.items() if k.startswith("model.diffusion_model.")}
    theirs = SINGLE_FILE.convert_ltx2_transformer_to_diffusers(transformer)
    assert_same(theirs, ours["transformer"])
    vae = {k: v for k, v in file.items() if k.startswith("vae.")}
    assert_same(SINGLE_FILE.convert_ltx2_vae_to_diffusers(vae), ours["vae"])
    assert_same(ours["vae"], weights["vae"])
    audio = {k: v for k, v in file.items() if k.startswith("audio_vae.")}
    assert_same(SINGLE_FILE.convert_ltx2_audio_vae_to_diffusers(audio), ours["audio_vae"])


TRANSFORMER_2_3 = (
    ("prompt_adaln_single.linear.weight", "prompt_adaln.linear.weight"),
    (
        "audio_prompt_adaln_single.emb.timestep_embedder.linear_1.bias",
        "audio_prompt_adaln.emb.timestep_embedder.linear_1.bias",
    ),
    ("adaln_single.linear.bias", "time_embed.linear.bias"),
)
DECODER_2_3 = (
    ("decoder.up_blocks.7.conv.conv.weight", "decoder.up_blocks.3.upsamplers.0.conv.conv.weight"),
    (
        "decoder.up_blocks.8.res_blocks.0.conv1.conv.weight",
        "decoder.up_blocks.3.resnets.0.conv1.conv.weight",
    ),
)


@pytest.mark.parametrize(("file_key", "name"), TRANSFORMER_2_3)
def test_ltx_2_3_s_prompt_modulation_maps_both_ways(file_key: str, name: str) -> None:
    assert checkpoint_keys.transformer_to_diffusers(file_key) == name
    assert checkpoint_keys.transformer_from_diffusers(name) == file_key


@pytest.mark.parametrize(("file_key", "name"), DECODER_2_3)
def test_a_decoder_of_four_up_blocks_maps_both_ways(file_key: str, name: str) -> None:
    assert checkpoint_keys.vae_to_diffusers(file_key, 4) == name
    assert checkpoint_keys.vae_from_diffusers(name, 4) == file_key


def test_ltx_2_3_s_per_stream_projections_and_gated_connectors_map_both_ways() -> None:
    """LTX-2.3's connectors: a projection per stream (`video_aggregate_embed`,
    `audio_aggregate_embed`) and gated attention, read back by the whole file's map."""
    ltx2: Any = module("diffusers.pipelines.ltx2")
    config: dict[str, Any] = {
        "caption_channels": 8,
        "text_proj_in_factor": 3,
        "video_connector_num_attention_heads": 2,
        "video_connector_attention_head_dim": 8,
        "video_connector_num_layers": 1,
        "video_connector_num_learnable_registers": 4,
        "video_gated_attn": True,
        "audio_connector_num_attention_heads": 2,
        "audio_connector_attention_head_dim": 4,
        "audio_connector_num_layers": 1,
        "audio_connector_num_learnable_registers": 4,
        "audio_gated_attn": True,
        "per_modality_projections": True,
        "video_hidden_dim": 16,
        "audio_hidden_dim": 8,
        "proj_bias": True,
    }
    weights: dict[str, torch.Tensor] = dict(ltx2.LTX2TextConnectors(**config).state_dict())
    names = to_checkpoint("connectors", weights)
    assert "text_embedding_projection.video_aggregate_embed.weight" in names.values()
    assert "text_embedding_projection.audio_aggregate_embed.bias" in names.values()
    back = split(names.values())
    assert {k for part, m in back.items() if part != "connectors" for k in m} == set()
    read = {back["connectors"][names[k]]: v for k, v in weights.items()}
    assert_same(read, weights)
    ltx2.LTX2TextConnectors(**config).load_state_dict(read, strict=True)


def test_comfyui_s_gemma_language_model_maps_onto_transformers_naming() -> None:
    """The kit's Gemma 3, its language model named as ComfyUI's `gemma_3_12B_it` file names it
    (ComfyUI's probe key among them), read back strictly into transformers' language model."""
    from inline_core.families.ltx2 import gemma_keys
    from inline_core.families.ltx2.kit import build_tokenizer, gemma3_config

    lib: Any = module("transformers")
    torch.manual_seed(1)  # pyright: ignore[reportUnknownMemberType]
    model: Any = lib.Gemma3ForConditionalGeneration(gemma3_config(len(build_tokenizer()) + 3))
    state: dict[str, torch.Tensor] = dict(model.state_dict())
    comfy = {gemma_keys.from_diffusers(k): v for k, v in state.items()}
    comfy_state = {k: v for k, v in comfy.items() if k is not None}
    assert "model.layers.1.self_attn.q_norm.weight" in comfy_state
    assert gemma_keys.is_comfy_gemma(set(comfy_state))
    assert not gemma_keys.is_comfy_gemma(set(state))  # transformers' own naming is not
    back: dict[str, torch.Tensor] = {}
    for key, value in comfy_state.items():
        name = gemma_keys.to_diffusers(key)
        assert name is not None
        back[name.removeprefix("model.language_model.")] = value
    fresh: Any = lib.Gemma3ForConditionalGeneration(model.config)
    fresh.model.language_model.load_state_dict(back, strict=True)
    ids = torch.tensor([[2, 5, 9, 11]])
    with torch.inference_mode():
        want = model.model.language_model(input_ids=ids).last_hidden_state
        got = fresh.model.language_model(input_ids=ids).last_hidden_state
    assert torch.equal(got, want)
    assert gemma_keys.to_diffusers("vision_model.embeddings.patch_embedding.weight") is None
    assert gemma_keys.to_diffusers("spiece_model") is None
