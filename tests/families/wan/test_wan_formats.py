"""Wan's file formats: the kit's ComfyUI files are recognised and configured from their shapes
alone (the shared rule table), and their original key naming converts back to diffusers' exactly."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from inline_core.diffusion.files.scales import weights_only
from inline_core.diffusion.files.shapes import ConfigInferenceError, read_shapes
from inline_core.diffusion.formats import umt5, wan22_vae, wan_vae
from inline_core.diffusion.libs import load_safetensors
from inline_core.families.wan import transformer as wan_transformer
from inline_core.families.wan.files import is_wan_model
from inline_core.families.wan.kit import (
    TI2V_TRANSFORMER_CONFIG,
    TI2V_VAE_CONFIG,
    TRANSFORMER_CONFIG,
    VAE_CONFIG,
    WanKit,
    build_parts,
)
from inline_core.families.wan.variants import A14B_I2V, I2V, TI2V, variant_of


@pytest.fixture(scope="module")
def parts() -> dict[str, Any]:
    return build_parts()


@pytest.fixture(scope="module")
def ti2v_parts() -> dict[str, Any]:
    return build_parts("ti2v")


def test_transformer_file_config_is_inferred_from_shapes(wan_kit: WanKit) -> None:
    assert wan_kit.diffusion_file is not None
    shapes = read_shapes(wan_kit.diffusion_file)
    assert shapes is not None and "head.modulation" in shapes  # the original naming
    assert is_wan_model(shapes)
    config = wan_transformer.infer_config(shapes)
    for key, value in TRANSFORMER_CONFIG.items():
        assert config[key] == value, key
    assert config["image_dim"] is None


@pytest.mark.parametrize(
    ("dim", "layers", "ffn", "heads", "channels", "variant"),
    [
        (1536, 30, 8960, 12, 16, "1.3B"),
        (5120, 40, 13824, 40, 16, "14B"),
        (3072, 30, 14336, 24, 48, "TI2V-5B"),
    ],
)
def test_published_variants_are_told_from_shapes(
    dim: int, layers: int, ffn: int, heads: int, channels: int, variant: str
) -> None:
    """Header shapes of the published 1.3B, 14B and Wan 2.2 5B files (no weights needed)."""
    shapes: dict[str, tuple[int, ...]] = {
        "head.modulation": (1, 2, dim),
        "patch_embedding.weight": (dim, channels, 1, 2, 2),
        "text_embedding.0.weight": (dim, 4096),
        "time_embedding.0.weight": (dim, 256),
        "head.head.weight": (channels * 4, dim),
    }
    for i in range(layers):
        shapes[f"blocks.{i}.ffn.0.weight"] = (ffn, dim)
        shapes[f"blocks.{i}.norm3.weight"] = (dim,)
        shapes[f"blocks.{i}.self_attn.norm_q.weight"] = (dim,)
    prefixed = {f"model.diffusion_model.{k}": v for k, v in shapes.items()}
    for candidate in (shapes, prefixed):
        config = wan_transformer.infer_config(candidate)
        assert config["num_attention_heads"] == heads
        assert config["attention_head_dim"] == 128
        assert (config["num_layers"], config["ffn_dim"], config["text_dim"]) == (layers, ffn, 4096)
        assert wan_transformer.variant(config) == variant
        assert (config["in_channels"], config["out_channels"]) == (channels, channels)
        assert is_wan_model(candidate)
        kind = variant_of(config)
        assert kind is not None and kind.image_to_video == (channels == 48)
    image_to_video = {**shapes, "patch_embedding.weight": (dim, 36, 1, 2, 2)}
    image_to_video["img_emb.proj.1.weight"] = (dim, 1280)
    assert wan_transformer.is_wan_transformer(image_to_video)
    assert is_wan_model(image_to_video)  # Wan 2.1 image-to-video: its CLIP-vision embedder
    i2v = wan_transformer.infer_config(image_to_video)
    assert (i2v["image_dim"], i2v["added_kv_proj_dim"]) == (1280, dim)
    assert variant_of(i2v) is I2V
    expert = {k: v for k, v in image_to_video.items() if not k.startswith("img_emb.")}
    assert variant_of(wan_transformer.infer_config(expert)) is None  # alone: not renderable
    assert variant_of(wan_transformer.infer_config(expert), pair=True) is A14B_I2V


def test_a_scaled_fp8_transformer_is_configured_as_its_plain_file_is() -> None:
    plain = {
        "head.modulation": (1, 2, 32),
        "patch_embedding.weight": (32, 16, 1, 2, 2),
        "text_embedding.0.weight": (32, 32),
        "time_embedding.0.weight": (32, 256),
        "blocks.0.ffn.0.weight": (64, 32),
        "head.head.weight": (64, 32),
    }
    scales = {
        "blocks.0.ffn.0.scale_weight": (),
        "blocks.0.ffn.0.scale_input": (),
        "scaled_fp8": (0,),
    }
    scaled = weights_only({**plain, **scales})  # what `read_shapes` gives of its header
    assert scaled == plain and is_wan_model(scaled)
    assert wan_transformer.infer_config(scaled) == wan_transformer.infer_config(plain)


def test_transformer_keys_round_trip(parts: dict[str, Any], wan_kit: WanKit) -> None:
    assert wan_kit.diffusion_file is not None
    sd = parts["transformer"].state_dict()
    back = wan_transformer.from_original(load_safetensors(wan_kit.diffusion_file), {})
    assert set(back) == set(sd)
    assert all(torch.equal(back[k], sd[k]) for k in sd)


def test_vae_file_round_trips_and_is_configured(parts: dict[str, Any], wan_kit: WanKit) -> None:
    assert wan_kit.vae_file is not None
    shapes = read_shapes(wan_kit.vae_file)
    assert shapes is not None and wan_vae.is_wan_vae(shapes)
    config = wan_vae.infer_config(shapes)
    assert config["base_dim"] == VAE_CONFIG["base_dim"]
    assert config["z_dim"] == 16
    sd = parts["vae"].state_dict()
    back = wan_vae.from_original(load_safetensors(wan_kit.vae_file), config)
    assert set(back) == set(sd)
    assert all(torch.equal(back[k], sd[k]) for k in sd)


def test_vae_of_another_layout_is_refused_by_name() -> None:
    shapes = {
        wan_vae.MARKER: (32,),
        "encoder.conv1.weight": (32, 12, 3, 3, 3),
        "conv2.weight": (48, 48, 1, 1, 1),
        "decoder.conv1.weight": (32, 48, 3, 3, 3),
        "decoder.upsamples.0.residual.0.gamma": (32, 1, 1, 1),
    }
    with pytest.raises(ConfigInferenceError, match="Wan 2.2"):
        wan_vae.infer_config(shapes)


def test_umt5_file_config_is_inferred(parts: dict[str, Any], wan_kit: WanKit) -> None:
    assert wan_kit.text_encoder_file is not None
    shapes = read_shapes(wan_kit.text_encoder_file)
    assert shapes is not None and umt5.is_umt5(shapes)
    assert umt5.TIED not in shapes  # ComfyUI's naming: the shared embedding only
    config = umt5.infer_config(shapes)
    model_config = parts["text_encoder"].config
    for key in ("vocab_size", "d_model", "d_kv", "d_ff", "num_layers", "num_heads"):
        assert config[key] == getattr(model_config, key), key
    assert config["feed_forward_proj"] == "gated-gelu"
    converted = umt5.from_single(load_safetensors(wan_kit.text_encoder_file), config)
    assert set(converted) == set(parts["text_encoder"].state_dict())


def test_ti2v_transformer_file_is_the_5b_layout(wan_kit: WanKit) -> None:
    assert wan_kit.ti2v_diffusion_file is not None
    shapes = read_shapes(wan_kit.ti2v_diffusion_file)
    assert shapes is not None and is_wan_model(shapes)
    config = wan_transformer.infer_config(shapes)
    for key, value in TI2V_TRANSFORMER_CONFIG.items():
        assert config[key] == value, key
    assert variant_of(config) is TI2V


def test_wan22_vae_file_round_trips_and_is_configured(
    ti2v_parts: dict[str, Any], wan_kit: WanKit
) -> None:
    """The 48-channel Wan 2.2 VAE: its original (nested, residual) naming converts to diffusers'
    exactly, and its config, patch and latent statistics come from the shapes alone."""
    assert wan_kit.ti2v_vae_file is not None
    shapes = read_shapes(wan_kit.ti2v_vae_file)
    assert shapes is not None and wan_vae.is_wan_vae(shapes)
    assert wan22_vae.MARKER in shapes  # the Wan 2.2 repository's naming
    config = wan_vae.infer_config(shapes)
    for key, value in TI2V_VAE_CONFIG.items():
        assert config[key] == value, key
    assert config["temperal_downsample"] == [False, True, True]
    sd = ti2v_parts["vae"].state_dict()
    back = wan_vae.from_original(load_safetensors(wan_kit.ti2v_vae_file), config)
    assert set(back) == set(sd)
    assert all(torch.equal(back[k], sd[k]) for k in sd)


def test_wan22_vae_of_other_channels_is_refused() -> None:
    shapes = {
        wan_vae.MARKER: (32,),
        wan22_vae.MARKER: (32, 1, 1, 1),
        "encoder.conv1.weight": (32, 12, 3, 3, 3),
        "conv2.weight": (32, 32, 1, 1, 1),
    }
    with pytest.raises(ConfigInferenceError, match="48"):
        wan_vae.infer_config(shapes)
