"""SDXL's download table: its targets, what each provides, and where each lands (no network)."""

from __future__ import annotations

from pathlib import Path

from inline_core.families.sdxl.download import DOWNLOADS, REPO, expand, plan


def test_the_default_is_the_base_checkpoint_and_its_tokenizer(tmp_path: Path) -> None:
    todo = plan([], tmp_path)
    assert [name for name, _ in todo] == ["checkpoint", "tokenizer"]
    checkpoint, tokenizer = (t for _, t in todo)
    assert checkpoint.repo_id == REPO == tokenizer.repo_id
    assert checkpoint.destination(tmp_path) == tmp_path / "checkpoints/sd_xl_base_1.0.safetensors"
    assert tokenizer.destination(tmp_path) == tmp_path / "text_encoders" / "clip_tokenizer"
    assert "tokenizer/vocab.json" in tokenizer.files and "tokenizer/merges.txt" in tokenizer.files


def test_every_part_of_the_stack_has_a_source() -> None:
    for role in ("diffusion_model", "vae", "text_encoder", "text_encoder_2", "tokenizer"):
        assert DOWNLOADS.providing(role), role
    assert expand(["diffusers", "comfy"]) == ["diffusers", "checkpoint", "tokenizer"]


def test_the_diffusers_folder_lands_in_checkpoints_with_full_precision_parts(
    tmp_path: Path,
) -> None:
    [(_, target)] = plan(["diffusers"], tmp_path)
    assert target.destination(tmp_path) == tmp_path / "checkpoints/stable-diffusion-xl-base-1.0"
    assert "unet/diffusion_pytorch_model.safetensors" in target.files
    assert "tokenizer_2/vocab.json" in target.files and "model_index.json" in target.files
    assert not any("fp16" in name for name in target.files)
