"""An all-in-one checkpoint's views, from its keys alone (torch-free), and a view as a `Source`:
its own identity, and carried whole across the job wire."""

from __future__ import annotations

from pathlib import Path

from inline_core.diffusion.files.checkpoint import View, views_of
from inline_core.diffusion.files.scales import weights_only
from inline_core.models.source import Source


def test_each_part_of_comfyuis_layouts_is_one_view() -> None:
    keys = [
        "model.diffusion_model.x_embedder.weight",
        "model.diffusion_model.layers.0.attention.qkv.weight",
        "first_stage_model.decoder.conv_in.weight",
        "text_encoders.qwen3_4b.transformer.model.embed_tokens.weight",
        "text_encoders.clip_l.transformer.text_model.embeddings.token_embedding.weight",
        "cond_stage_model.transformer.text_model.final_layer_norm.weight",
        "conditioner.embedders.1.model.ln_final.weight",
        "model_ema.decay",  # neither: not listed
    ]
    assert views_of(keys) == (
        View("diffusion_model", "diffusion_model", "model.diffusion_model."),
        View("vae", "vae", "first_stage_model."),
        View("text_encoder", "cond_stage_model", "cond_stage_model."),
        View("text_encoder", "1", "conditioner.embedders.1."),
        View("text_encoder", "clip_l", "text_encoders.clip_l."),
        View("text_encoder", "qwen3_4b", "text_encoders.qwen3_4b."),
    )
    assert views_of(["blocks.0.attn.q.weight"]) == ()  # a split file: no views


def test_a_scaled_fp8_checkpoints_marker_is_no_weight_in_its_view() -> None:
    view = {"scaled_fp8": (0,), "blocks.0.q.weight": (4, 4), "blocks.0.q.scale_weight": ()}
    assert weights_only(view) == {"blocks.0.q.weight": (4, 4)}


def test_a_view_is_a_component_of_its_own(tmp_path: Path) -> None:
    file = tmp_path / "aio.safetensors"
    file.write_bytes(b"x")
    model, vae = (
        Source(file, view="model.diffusion_model."),
        Source(file, view="first_stage_model."),
    )
    assert model.is_file and model.location == file
    assert model.identity() != vae.identity() and model.identity().startswith(
        Source(file).identity()
    )
    assert Source.from_json(model.to_json()) == model
    assert "view" not in Source(file).to_json()  # a plain file's record is as before
