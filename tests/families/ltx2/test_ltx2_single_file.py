"""ComfyUI's all-in-one LTX-2 file (`checkpoints/ltx-2*.safetensors`): every part's config read
from Lightricks' JSON in its header, its keys mapped, every part loaded. A tiny file written
from tiny diffusers parts renders exactly what the same parts render as a diffusers folder;
LTX-2.3's published header maps onto diffusers' own 2.3 configs; a bad file is a 422 naming the
file and what it lacks, at submit."""

from __future__ import annotations

import copy
import importlib
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from ltx2_harness import ltx2_rig, node_params, render, take_audio, take_frames

from inline_core.diffusion.files.header import TensorInfo
from inline_core.diffusion.libs import load_safetensors, save_safetensors
from inline_core.errors import InvalidRequest, ModelMissing, RunFailed
from inline_core.families.ltx2.checkpoint_keys import split, to_checkpoint
from inline_core.families.ltx2.kit_single_file import (
    FILE,
    FOLDER,
    LIGHTRICKS_CONFIG,
    SingleFileKit,
    build_single_file_parts,
    write_checkpoint,
    write_single_file_kit,
)
from inline_core.families.ltx2.single_file_config import layout, part_configs
from inline_core.sampling.loop import StepLoopSampler

CLASSES = {
    "transformer": ("diffusers", "LTX2VideoTransformer3DModel"),
    "connectors": ("diffusers.pipelines.ltx2", "LTX2TextConnectors"),
    "vae": ("diffusers", "AutoencoderKLLTX2Video"),
    "audio_vae": ("diffusers", "AutoencoderKLLTX2Audio"),
    "vocoder": ("diffusers.pipelines.ltx2", "LTX2Vocoder"),
}
# Keys a diffusers class fills in itself (unused block types, ratios it derives).
DERIVED = {"down_block_types", "spatial_compression_ratio", "temporal_compression_ratio"}


@pytest.fixture(scope="module")
def single_file_kit(tmp_path_factory: pytest.TempPathFactory) -> SingleFileKit:
    return write_single_file_kit(tmp_path_factory.mktemp("ltx2-single") / "models")


def plain(value: Any) -> Any:
    return json.loads(json.dumps(value))


def test_every_part_s_config_is_the_diffusers_folder_s(single_file_kit: SingleFileKit) -> None:
    import importlib

    configs = layout(single_file_kit.file).configs
    for part, (library, name) in CLASSES.items():
        cls: Any = getattr(importlib.import_module(library), name)
        ours = dict(cls.from_config(configs[part]).config)
        theirs = json.loads((single_file_kit.folder / part / "config.json").read_text())
        for key, value in theirs.items():
            if not key.startswith("_") and key not in DERIVED:
                assert plain(ours[key]) == value, (part, key)


def test_a_render_from_the_file_equals_the_render_from_the_folder(
    single_file_kit: SingleFileKit, ltx2_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    rig = ltx2_rig(single_file_kit.root, ltx2_sampler)
    params: dict[str, Any] = {"guidance": 3.0, "audio_guidance": 5.0, "negative_prompt": "dull"}
    sources = rig.check("l", node_params(model=FILE, **params))
    transformer = sources.get("transformer")
    assert transformer is not None and transformer.view == "model.diffusion_model."
    for part in ("vae", "audio_vae", "vocoder", "connectors"):
        source = sources.get(part)
        assert source is not None and source.path == single_file_kit.file, part
    encoder = sources.get("text_encoder")
    assert encoder is not None and encoder.path == single_file_kit.encoder
    from_file = render(rig, tmp_path / "file", model=FILE, **params)
    from_folder = render(rig, tmp_path / "folder", model=FOLDER, **params)
    frames, want = take_frames(from_file), take_frames(from_folder)
    assert frames.shape == (5, 32, 32, 3) and frames.std() > 1.0
    assert np.array_equal(frames, want)
    sound, want_sound = take_audio(from_file), take_audio(from_folder)
    assert sound.sample_rate == want_sound.sample_rate == 16000
    assert np.array_equal(sound.samples, want_sound.samples)
    assert float(np.abs(sound.samples).max()) > 0.003  # a sound, not silence


# LTX-2.3's header config, as its published file carries it (the fields these readers use).
RELEASED_2_3: dict[str, Any] = {
    "transformer": {
        "activation_fn": "gelu-approximate",
        "attention_bias": True,
        "attention_head_dim": 128,
        "caption_channels": 3840,
        "cross_attention_dim": 4096,
        "in_channels": 128,
        "norm_elementwise_affine": False,
        "norm_eps": 1e-06,
        "num_attention_heads": 32,
        "num_layers": 48,
        "out_channels": 128,
        "qk_norm": "rms_norm",
        "positional_embedding_type": "rope",
        "positional_embedding_theta": 10000.0,
        "positional_embedding_max_pos": [20, 2048, 2048],
        "timestep_scale_multiplier": 1000,
        "av_ca_timestep_scale_multiplier": 1000.0,
        "causal_temporal_positioning": True,
        "audio_num_attention_heads": 32,
        "audio_attention_head_dim": 64,
        "use_audio_video_cross_attention": True,
        "share_ff": False,
        "audio_out_channels": 128,
        "audio_cross_attention_dim": 2048,
        "audio_positional_embedding_max_pos": [20],
        "av_cross_ada_norm": True,
        "use_embeddings_connector": True,
        "connector_attention_head_dim": 128,
        "connector_num_attention_heads": 32,
        "connector_num_layers": 8,
        "connector_positional_embedding_max_pos": [4096],
        "connector_num_learnable_registers": 128,
        "apply_gated_attention": True,
        "connector_apply_gated_attention": True,
        "caption_proj_before_connector": True,
        "audio_connector_attention_head_dim": 64,
        "audio_connector_num_attention_heads": 32,
        "cross_attention_adaln": True,
        "rope_type": "split",
        "frequencies_precision": "float64",
    },
    "vae": {
        "dims": 3,
        "in_channels": 3,
        "out_channels": 3,
        "latent_channels": 128,
        "encoder_blocks": [
            ["res_x", {"num_layers": 4}],
            ["compress_space_res", {"multiplier": 2}],
            ["res_x", {"num_layers": 6}],
            ["compress_time_res", {"multiplier": 2}],
            ["res_x", {"num_layers": 4}],
            ["compress_all_res", {"multiplier": 2}],
            ["res_x", {"num_layers": 2}],
            ["compress_all_res", {"multiplier": 1}],
            ["res_x", {"num_layers": 2}],
        ],
        "decoder_blocks": [
            ["res_x", {"num_layers": 4}],
            ["compress_space", {"multiplier": 2}],
            ["res_x", {"num_layers": 6}],
            ["compress_time", {"multiplier": 2}],
            ["res_x", {"num_layers": 4}],
            ["compress_all", {"multiplier": 1}],
            ["res_x", {"num_layers": 2}],
            ["compress_all", {"multiplier": 2}],
            ["res_x", {"num_layers": 2}],
        ],
        "patch_size": 4,
        "causal_decoder": False,
        "encoder_base_channels": 128,
        "decoder_base_channels": 128,
        "spatial_padding_mode": "zeros",
    },
    "audio_vae": {
        "model": {
            "params": {
                "ddconfig": {
                    "double_z": True,
                    "mel_bins": 64,
                    "z_channels": 8,
                    "resolution": 256,
                    "in_channels": 2,
                    "out_ch": 2,
                    "ch": 128,
                    "ch_mult": [1, 2, 4],
                    "num_res_blocks": 2,
                    "attn_resolutions": [],
                    "dropout": 0.0,
                    "mid_block_add_attention": False,
                    "norm_type": "pixel",
                    "causality_axis": "height",
                },
                "sampling_rate": 16000,
            }
        },
        "preprocessing": {
            "audio": {"sampling_rate": 16000},
            "stft": {"hop_length": 160, "causal": True},
        },
    },
    "vocoder": {
        "vocoder": {
            "upsample_initial_channel": 1536,
            "resblock": "AMP1",
            "upsample_rates": [5, 2, 2, 2, 2, 2],
            "resblock_kernel_sizes": [3, 7, 11],
            "upsample_kernel_sizes": [11, 4, 4, 4, 4, 4],
            "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
            "stereo": True,
            "use_tanh_at_final": False,
            "activation": "snakebeta",
            "use_bias_at_final": False,
        },
        "bwe": {
            "upsample_initial_channel": 512,
            "resblock": "AMP1",
            "upsample_rates": [6, 5, 2, 2, 2],
            "resblock_kernel_sizes": [3, 7, 11],
            "upsample_kernel_sizes": [12, 11, 4, 4, 4],
            "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
            "stereo": True,
            "use_tanh_at_final": False,
            "activation": "snakebeta",
            "use_bias_at_final": False,
            "apply_final_activation": False,
            "input_sampling_rate": 16000,
            "output_sampling_rate": 48000,
            "hop_length": 80,
            "n_fft": 512,
            "win_size": 512,
            "num_mels": 64,
        },
    },
}
RELEASED_2_3_SHAPES = {
    "model.diffusion_model.audio_patchify_proj.weight": (2048, 128),
    "text_embedding_projection.video_aggregate_embed.weight": (4096, 3840 * 49),
    "text_embedding_projection.video_aggregate_embed.bias": (4096,),
    "vocoder.vocoder.conv_pre.weight": (1536, 128, 7),
    "vocoder.bwe_generator.conv_pre.weight": (512, 128, 7),
}
# diffusers' own LTX-2.3 configs (scripts/convert_ltx2_to_diffusers.py), the fields read here.
DIFFUSERS_2_3 = {
    "transformer": {
        "in_channels": 128,
        "num_attention_heads": 32,
        "attention_head_dim": 128,
        "cross_attention_dim": 4096,
        "vae_scale_factors": (8, 32, 32),
        "pos_embed_max_pos": 20,
        "base_height": 2048,
        "base_width": 2048,
        "gated_attn": True,
        "cross_attn_mod": True,
        "audio_in_channels": 128,
        "audio_num_attention_heads": 32,
        "audio_attention_head_dim": 64,
        "audio_cross_attention_dim": 2048,
        "audio_scale_factor": 4,
        "audio_pos_embed_max_pos": 20,
        "audio_sampling_rate": 16000,
        "audio_hop_length": 160,
        "audio_gated_attn": True,
        "audio_cross_attn_mod": True,
        "num_layers": 48,
        "qk_norm": "rms_norm_across_heads",
        "caption_channels": 3840,
        "rope_double_precision": True,
        "timestep_scale_multiplier": 1000,
        "cross_attn_timestep_scale_multiplier": 1000,
        "rope_type": "split",
        "use_prompt_embeddings": False,
    },
    "connectors": {
        "caption_channels": 3840,
        "text_proj_in_factor": 49,
        "video_connector_num_attention_heads": 32,
        "video_connector_attention_head_dim": 128,
        "video_connector_num_layers": 8,
        "video_connector_num_learnable_registers": 128,
        "video_gated_attn": True,
        "audio_connector_num_attention_heads": 32,
        "audio_connector_attention_head_dim": 64,
        "audio_connector_num_layers": 8,
        "audio_gated_attn": True,
        "connector_rope_base_seq_len": 4096,
        "rope_double_precision": True,
        "per_modality_projections": True,
        "video_hidden_dim": 4096,
        "audio_hidden_dim": 2048,
        "proj_bias": True,
    },
    "vae": {
        "block_out_channels": (256, 512, 1024, 1024),
        "decoder_block_out_channels": (256, 512, 512, 1024),
        "layers_per_block": (4, 6, 4, 2, 2),
        "decoder_layers_per_block": (4, 6, 4, 2, 2),
        "decoder_inject_noise": (False, False, False, False, False),
        "downsample_type": ("spatial", "temporal", "spatiotemporal", "spatiotemporal"),
        "upsample_type": ("spatiotemporal", "spatiotemporal", "temporal", "spatial"),
        "upsample_residual": (False, False, False, False),
        "upsample_factor": (2, 2, 1, 2),
        "patch_size": 4,
        "decoder_causal": False,
        "encoder_spatial_padding_mode": "zeros",
        "decoder_spatial_padding_mode": "zeros",
        "spatial_compression_ratio": 32,
        "temporal_compression_ratio": 8,
    },
    "vocoder": {
        "_class_name": "LTX2VocoderWithBWE",
        "in_channels": 128,
        "hidden_channels": 1536,
        "out_channels": 2,
        "upsample_kernel_sizes": [11, 4, 4, 4, 4, 4],
        "upsample_factors": [5, 2, 2, 2, 2, 2],
        "resnet_kernel_sizes": [3, 7, 11],
        "resnet_dilations": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
        "act_fn": "snakebeta",
        "leaky_relu_negative_slope": 0.1,
        "antialias": True,
        "antialias_ratio": 2,
        "antialias_kernel_size": 12,
        "final_act_fn": None,
        "final_bias": False,
        "bwe_in_channels": 128,
        "bwe_hidden_channels": 512,
        "bwe_out_channels": 2,
        "bwe_upsample_kernel_sizes": [12, 11, 4, 4, 4],
        "bwe_upsample_factors": [6, 5, 2, 2, 2],
        "bwe_resnet_kernel_sizes": [3, 7, 11],
        "bwe_resnet_dilations": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
        "bwe_act_fn": "snakebeta",
        "bwe_leaky_relu_negative_slope": 0.1,
        "bwe_antialias": True,
        "bwe_antialias_ratio": 2,
        "bwe_antialias_kernel_size": 12,
        "bwe_final_act_fn": None,
        "bwe_final_bias": False,
        "filter_length": 512,
        "hop_length": 80,
        "window_length": 512,
        "num_mel_channels": 64,
        "input_sampling_rate": 16000,
        "output_sampling_rate": 48000,
    },
    "audio_vae": {
        "base_channels": 128,
        "ch_mult": (1, 2, 4),
        "num_res_blocks": 2,
        "attn_resolutions": None,
        "latent_channels": 8,
        "mel_bins": 64,
        "mel_hop_length": 160,
    },
}


# A tiny LTX2VocoderWithBWE: its layers, for the naming (not a working sound path).
TINY_BWE: dict[str, Any] = {
    "in_channels": 16,
    "hidden_channels": 32,
    "upsample_kernel_sizes": [16, 10, 8],
    "upsample_factors": [8, 5, 4],
    "resnet_kernel_sizes": [3],
    "resnet_dilations": [[1, 3]],
    "bwe_in_channels": 16,
    "bwe_hidden_channels": 32,
    "bwe_upsample_kernel_sizes": [4],
    "bwe_upsample_factors": [2],
    "bwe_resnet_kernel_sizes": [3],
    "bwe_resnet_dilations": [[1, 3]],
    "filter_length": 64,
    "hop_length": 16,
    "window_length": 64,
    "num_mel_channels": 8,
    "input_sampling_rate": 16000,
    "output_sampling_rate": 32000,
}


def released_header() -> dict[str, TensorInfo]:
    return {k: TensorInfo("BF16", shape) for k, shape in RELEASED_2_3_SHAPES.items()}


def test_ltx_2_3_s_published_header_maps_onto_diffusers_own_2_3_configs() -> None:
    got = part_configs(RELEASED_2_3, released_header())
    for part, want in DIFFUSERS_2_3.items():
        for key, value in want.items():
            assert got[part][key] == value, (part, key)
    assert set(got["vocoder"]) == set(DIFFUSERS_2_3["vocoder"])  # every field of the class


def test_ltx_2_3_s_vocoder_round_trips_through_the_file_s_names() -> None:
    """A tiny vocoder with its bandwidth extension, its weights named as the file names them
    (its activations' `upsample`/`downsample.lowpass` filters beside `.ups.`) and mapped back,
    loads strictly, every tensor in its place."""
    lib: Any = importlib.import_module("diffusers.pipelines.ltx2")
    config = {k: v for k, v in TINY_BWE.items() if k != "_class_name"}
    torch.manual_seed(3)  # pyright: ignore[reportUnknownMemberType]
    vocoder: Any = lib.LTX2VocoderWithBWE(**config).eval()
    state: dict[str, torch.Tensor] = dict(vocoder.state_dict())
    names = to_checkpoint("vocoder", state)
    assert "vocoder.vocoder.ups.0.weight" in names.values()
    assert any(".downsample.lowpass." in n for n in names.values())
    assert any(".upsample.filter" in n for n in names.values())
    back = split(names.values())["vocoder"]
    read = {back[names[k]]: v for k, v in state.items()}
    fresh: Any = lib.LTX2VocoderWithBWE(**config).eval()
    fresh.load_state_dict(read, strict=True)
    loaded: dict[str, torch.Tensor] = dict(fresh.state_dict())
    assert all(torch.equal(loaded[k], v) for k, v in state.items())


def _with(tmp: Path, kit: SingleFileKit, drop: str = "", config: Any = LIGHTRICKS_CONFIG) -> Path:
    """A models folder with a changed copy of the kit's file (`drop`: the keys under this prefix
    left out), its Gemma beside it."""
    root = tmp / "models"
    shutil.copytree(kit.encoder, root / "text_encoders" / kit.encoder.name)
    state = {
        k: v for k, v in load_safetensors(kit.file).items() if not drop or not k.startswith(drop)
    }
    path = root / "checkpoints" / FILE
    path.parent.mkdir(parents=True)
    save_safetensors(state, path, None if config is None else {"config": json.dumps(config)})
    return root


@pytest.mark.parametrize(
    ("drop", "config", "names"),
    [
        ("", None, "__metadata__['config']"),
        ("vocoder.", LIGHTRICKS_CONFIG, "no vocoder weights"),
        ("", {**LIGHTRICKS_CONFIG, "audio_vae": None}, "no audio_vae section"),
        (
            "",
            {
                **LIGHTRICKS_CONFIG,
                "transformer": {
                    k: v for k, v in LIGHTRICKS_CONFIG["transformer"].items() if k != "num_layers"
                },
            },
            "transformer.num_layers",
        ),
        (
            "",
            {
                **LIGHTRICKS_CONFIG,
                "vae": {**LIGHTRICKS_CONFIG["vae"], "decoder_blocks": [["attn", {"heads": 1}]]},
            },
            "vae.decoder_blocks[0]",
        ),
    ],
    ids=["no-config", "no-vocoder", "no-audio-vae-section", "no-layer-count", "unknown-block"],
)
def test_a_bad_file_is_model_missing_at_submit_naming_it_and_what_it_lacks(
    single_file_kit: SingleFileKit,
    ltx2_sampler: StepLoopSampler,
    tmp_path: Path,
    drop: str,
    config: Any,
    names: str,
) -> None:
    root = _with(tmp_path, single_file_kit, drop, config)
    rig = ltx2_rig(root, ltx2_sampler)
    with pytest.raises(ModelMissing) as caught:
        rig.check("l", node_params(model=FILE))
    assert str(root / "checkpoints" / FILE) in caught.value.message
    assert names in caught.value.message


def test_a_config_the_weights_do_not_match_fails_the_run_naming_the_keys(
    single_file_kit: SingleFileKit, ltx2_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    wrong = copy.deepcopy(LIGHTRICKS_CONFIG)
    wrong["transformer"]["num_layers"] = 3
    root = _with(tmp_path, single_file_kit, config=wrong)
    rig = ltx2_rig(root, ltx2_sampler)
    with pytest.raises(RunFailed) as caught:
        render(rig, tmp_path / "takes", model=FILE)
    assert str(root / "checkpoints" / FILE) in caught.value.message
    assert "transformer_blocks.2." in caught.value.message


def test_a_transformer_only_file_is_refused_naming_the_layouts_read(
    ltx2_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    root = tmp_path / "models"
    parts = build_single_file_parts()
    state = {k: v.contiguous() for k, v in parts["transformer"].state_dict().items()}
    named = {"patchify_proj.weight" if k == "proj_in.weight" else k: v for k, v in state.items()}
    named["audio_patchify_proj.weight"] = torch.zeros(8, 4)
    (root / "diffusion_models").mkdir(parents=True)
    save_safetensors(named, root / "diffusion_models" / "ltx-2-transformer.safetensors")
    rig = ltx2_rig(root, ltx2_sampler)
    with pytest.raises(InvalidRequest, match="all-in-one file"):
        rig.check("l", node_params(model="ltx-2-transformer.safetensors"))


def test_the_kit_s_checkpoint_writer_names_every_part_as_the_file_does(
    single_file_kit: SingleFileKit,
) -> None:
    keys = set(layout(single_file_kit.file).names["vocoder"])
    assert "vocoder.conv_pre.weight" in keys
    weights = {"vocoder": {"conv_pre.weight": torch.zeros(1)}}
    path = single_file_kit.root / "only-vocoder.safetensors"
    write_checkpoint(path, weights, None)
    assert set(load_safetensors(path)) == {"vocoder.conv_pre.weight"}
