"""Both layouts (ComfyUI single files, diffusers folder) load the same weights the same way."""

from __future__ import annotations

import shutil
from pathlib import Path

import torch
from zimage_harness import make_runner, max_diff, models_without_diffusion, render, take_pixels

from inline_core.diffusion.files.header import read_header
from inline_core.diffusion.formats import ldm_vae, qwen3
from inline_core.diffusion.libs import load_safetensors, save_safetensors
from inline_core.families.zimage import transformer
from inline_core.families.zimage.kit import (
    TRANSFORMER_CONFIGS,
    VAE_CONFIG,
    KitPaths,
    build_vae,
    write_qwen3_single_file,
)
from inline_core.sampling.loop import StepLoopSampler


def shapes(path: Path) -> dict[str, tuple[int, ...]]:
    return {k: v.shape for k, v in read_header(path).items()}


def test_single_file_uses_original_key_naming(kit: KitPaths) -> None:
    assert kit.diffusion_file is not None and kit.vae_file is not None
    keys = set(read_header(kit.diffusion_file))
    assert "layers.0.attention.qkv.weight" in keys and "x_embedder.weight" in keys
    assert not any("to_q" in k or k.startswith("all_") for k in keys)
    vae_keys = set(read_header(kit.vae_file))
    assert (
        "encoder.down.0.block.0.conv1.weight" in vae_keys
        and "decoder.up.3.upsample.conv.weight" in vae_keys
    )
    assert "encoder.mid.attn_1.q.weight" in vae_keys


def test_configs_inferred_from_shapes_match_the_built_models(kit: KitPaths) -> None:
    assert kit.diffusion_file is not None and kit.vae_file is not None
    config = transformer.infer_config(shapes(kit.diffusion_file))
    for key, value in TRANSFORMER_CONFIGS["tiny"].items():
        assert config[key] == value
    assert config["cap_feat_dim"] == 32 and config["axes_dims"] == [8, 12, 12]
    vae_config = ldm_vae.infer_config(shapes(kit.vae_file))
    for key in ("block_out_channels", "layers_per_block", "latent_channels", "norm_num_groups"):
        assert vae_config[key] == VAE_CONFIG[key]


def test_vae_ldm_naming_round_trips_through_diffusers_converter(kit: KitPaths) -> None:
    assert kit.vae_file is not None
    original = build_vae().state_dict()
    converted = ldm_vae.from_ldm(
        load_safetensors(kit.vae_file), ldm_vae.infer_config(shapes(kit.vae_file))
    )
    assert set(converted) == set(original)
    assert all(torch.equal(converted[k], original[k]) for k in original)


def test_both_layouts_render_identical_pixels(
    kit: KitPaths, sampler: StepLoopSampler, tmp_path: Path
) -> None:
    runner = make_runner(kit.root, sampler)
    single = take_pixels(render(runner, tmp_path, model="zimage_tiny.safetensors", guidance=1.5))
    folder = take_pixels(render(runner, tmp_path, model="zimage_tiny_diffusers", guidance=1.5))
    assert max_diff(single, folder) == 0


def test_prefixed_single_file_loads_like_the_bare_one(
    kit: KitPaths, sampler: StepLoopSampler, tmp_path: Path
) -> None:
    assert kit.diffusion_file is not None
    root = models_without_diffusion(kit, tmp_path / "models")
    state = load_safetensors(kit.diffusion_file)
    prefixed = {f"model.diffusion_model.{k}": v for k, v in state.items()}
    save_safetensors(prefixed, root / "diffusion_models" / "z_image_turbo_bf16.safetensors")
    ours = take_pixels(render(make_runner(root, sampler), tmp_path / "takes"))
    bare = take_pixels(render(make_runner(kit.root, sampler), tmp_path / "takes2"))
    assert max_diff(ours, bare) == 0


def test_single_file_qwen3_takes_the_packaged_tokenizer(
    kit: KitPaths, sampler: StepLoopSampler, tmp_path: Path
) -> None:
    assert kit.diffusion_file is not None and kit.vae_file is not None
    root = tmp_path / "models"
    (root / "diffusion_models").mkdir(parents=True)
    shutil.copy(kit.diffusion_file, root / "diffusion_models" / kit.diffusion_file.name)
    (root / "vae").mkdir()
    shutil.copy(kit.vae_file, root / "vae" / "ae.safetensors")
    write_qwen3_single_file(root / "text_encoders" / "qwen_3_4b.safetensors")
    runner = make_runner(root, sampler)
    sources = runner.sources()
    assert sources.require("text_encoder").path.name == "qwen_3_4b.safetensors"
    assert sources.require("tokenizer").path == qwen3.packaged_tokenizer()
    result = render(runner, tmp_path / "takes", "雪の中の赤い狐")  # the real Qwen3 vocabulary
    assert take_pixels(result).std() > 1.0
