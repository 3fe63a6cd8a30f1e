"""FLUX.2's files: the kit's single files read back to diffusers' keys exactly (transformer and
VAE), the variant is told from the files (klein or dev from the shapes, distilled or base from a
folder's `is_distilled` or a file's name), and the download table names the real files."""

from __future__ import annotations

from pathlib import Path

import torch

from inline_core.diffusion.files.shapes import read_shapes
from inline_core.diffusion.formats import flux2_vae
from inline_core.families.flux2 import transformer
from inline_core.families.flux2.download import KLEIN_4B, QWEN3_4B_REPO, plan
from inline_core.families.flux2.kit import VAE_CONFIG, Flux2Kit, build_transformer, build_vae
from inline_core.families.flux2.variants import variant_of
from inline_core.models.source import Source


def test_transformer_round_trips_bfl_naming() -> None:
    model = build_transformer()
    state = model.state_dict()
    original = transformer.to_original(state)
    assert "double_blocks.0.img_attn.qkv.weight" in original and "img_in.weight" in original
    back = transformer.from_original(dict(original), {})
    assert set(back) == set(state)
    assert all(torch.equal(back[k], state[k]) for k in state)
    shapes = {k: tuple(v.shape) for k, v in original.items()}
    config = transformer.infer_config(shapes)
    assert {k: config[k] for k in ("num_layers", "num_single_layers", "in_channels")} == {
        "num_layers": 1,
        "num_single_layers": 2,
        "in_channels": 128,
    }
    assert config["guidance_embeds"] is False


def test_vae_round_trips_comfy_naming() -> None:
    vae = build_vae()
    state = vae.state_dict()
    file_keys = flux2_vae.to_file(state, len(VAE_CONFIG["block_out_channels"]))
    assert "encoder.quant_conv.weight" in file_keys and "bn.running_mean" in file_keys
    shapes = {k: tuple(v.shape) for k, v in file_keys.items()}
    assert flux2_vae.is_flux2_vae(shapes)
    config = flux2_vae.infer_config(shapes)
    back = flux2_vae.from_file(dict(file_keys), config)
    assert set(back) == set(state)
    assert all(torch.equal(back[k], state[k]) for k in state)


def test_variants_are_told_from_the_files(flux2_kit: Flux2Kit) -> None:
    assert flux2_kit.diffusion_file and flux2_kit.base_file and flux2_kit.diffusers_dir
    distilled = Source(flux2_kit.diffusion_file)
    base = Source(flux2_kit.base_file)
    folder = Source(flux2_kit.diffusers_dir, "transformer")
    for source, title in (
        (distilled, "FLUX.2 klein 32-wide"),
        (base, "FLUX.2 klein 32-wide base"),
        (folder, "FLUX.2 klein 32-wide"),
    ):
        kind = variant_of(transformer.config_of(source), source)
        assert kind is not None and kind.klein and kind.title == title
    shapes = read_shapes(flux2_kit.diffusion_file)
    assert shapes is not None
    dev = {**shapes, "guidance_in.in_layer.weight": shapes["time_in.in_layer.weight"]}
    kind = variant_of(transformer.infer_config(dev), distilled)
    assert kind is not None and not kind.klein and kind.title == "FLUX.2 dev"


def test_default_download_is_klein_4b_with_the_zimage_qwen3(tmp_path: Path) -> None:
    todo = plan([], tmp_path)
    assert [name for name, _ in todo] == ["diffusion_model", "vae", "text_encoder"]
    dests = {t.destination(tmp_path) for _, t in todo}
    assert dests == {
        tmp_path / "diffusion_models" / "flux-2-klein-4b.safetensors",
        tmp_path / "vae" / "flux2-vae.safetensors",
        tmp_path / "text_encoders" / "qwen_3_4b.safetensors",
    }
    repos = {name: t.repo_id for name, t in todo}
    assert repos["diffusion_model"] == KLEIN_4B and repos["text_encoder"] == QWEN3_4B_REPO
