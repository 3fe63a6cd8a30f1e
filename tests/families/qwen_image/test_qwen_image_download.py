"""Qwen-Image's download table: its presets, where each target lands, and that what lands is what
the family's resolver looks for (no network here)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from inline_core.contract.files import StackResolver
from inline_core.families.qwen_image.download import (
    COMFY,
    COMFY_EDIT,
    DOWNLOADS,
    PROCESSOR_REPO,
    expand,
    plan,
)
from inline_core.families.qwen_image.files import RULES, processor_folder
from inline_core.families.qwen_image.kit import KitPaths
from inline_core.models.catalog import Catalog
from inline_core.models.source import Source


def test_the_default_is_2512_with_the_vae_fp8_encoder_and_tokenizer(tmp_path: Path) -> None:
    todo = plan([], tmp_path)
    assert [name for name, _ in todo] == ["model-2512-fp8", "vae", "text_encoder-fp8", "tokenizer"]
    assert [t.destination(tmp_path) for _, t in todo] == [
        tmp_path / "diffusion_models" / "qwen_image_2512_fp8_e4m3fn.safetensors",
        tmp_path / "vae" / "qwen_image_vae.safetensors",
        tmp_path / "text_encoders" / "qwen_2.5_vl_7b_fp8_scaled.safetensors",
        tmp_path / "text_encoders" / "qwen_2.5_vl_tokenizer",
    ]
    tokenizer = todo[-1][1]
    assert tokenizer.repo_id == PROCESSOR_REPO
    assert tokenizer.files == ("tokenizer/*", "processor/*")


def test_each_preset_takes_its_model_from_comfy_orgs_repos() -> None:
    assert DOWNLOADS.targets["model-edit-2509"].repo_id == COMFY_EDIT
    assert DOWNLOADS.targets["model"].repo_id == COMFY
    assert expand(["edit-2511"])[0] == "model-edit-2511"
    assert "lora-lightning-8steps" in expand(["lightning-8steps"])
    assert DOWNLOADS.targets["lora-lightning-8steps"].destination(Path("m")) == Path(
        "m/loras/Qwen-Image-Lightning-8steps-V1.0.safetensors"
    )
    with pytest.raises(ValueError, match="unknown download target"):
        expand(["qwen-image-3"])


def test_diffusers_edit_targets_bring_their_processor() -> None:
    edit = DOWNLOADS.targets["diffusers-edit-2509"]
    assert edit.layout == "diffusers" and "processor/*" in edit.files
    assert "processor/*" not in DOWNLOADS.targets["diffusers"].files
    folders = {t.folder for t in DOWNLOADS.targets.values() if t.layout == "diffusers"}
    assert len(folders) == 4  # one folder per repo: none lands on another


def test_the_tokenizer_and_processor_land_where_the_family_finds_them(
    qwen_kit: KitPaths, tmp_path: Path
) -> None:
    """A repo's `tokenizer/` and `processor/` folders, downloaded into the target's folder, are
    found for a single-file Qwen2.5-VL: the tokenizer as a subfolder source, the image
    processor beside it."""
    assert qwen_kit.tokenizer_dir is not None and qwen_kit.text_encoder_file is not None
    models = tmp_path / "models"
    landed = DOWNLOADS.targets["tokenizer"].destination(models)
    shutil.copytree(qwen_kit.tokenizer_dir, landed / "processor")
    # Qwen's repos keep the image processor's settings in `processor/` only.
    shutil.copytree(
        qwen_kit.tokenizer_dir, landed / "tokenizer", ignore=shutil.ignore_patterns("preproc*")
    )
    resolver = StackResolver(RULES, Catalog(models), {})
    found = resolver.tokenizer_for(Source(qwen_kit.text_encoder_file))
    assert found == Source(landed, "tokenizer")
    assert processor_folder(found) == landed / "processor"
