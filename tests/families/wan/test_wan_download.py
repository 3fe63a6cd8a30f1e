"""Wan's download table: its presets, where each target lands, and that what lands is what the
family's resolver looks for (no network here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inline_core.contract.files import StackResolver
from inline_core.families.wan.download import (
    COMFY_21,
    COMFY_22,
    DOWNLOADS,
    TOKENIZER_REPO,
    expand,
    main,
    plan,
)
from inline_core.families.wan.files import RULES
from inline_core.families.wan.kit import WanKit
from inline_core.models.catalog import Catalog
from inline_core.models.source import Source


def test_the_default_is_wan21_1_3b_with_its_vae_umt5_and_tokenizer(tmp_path: Path) -> None:
    todo = plan([], tmp_path)
    assert [name for name, _ in todo] == ["model-t2v-1.3b", "vae", "text_encoder", "tokenizer"]
    dests = [t.destination(tmp_path) for _, t in todo]
    assert dests == [
        tmp_path / "diffusion_models" / "wan2.1_t2v_1.3B_fp16.safetensors",
        tmp_path / "vae" / "wan_2.1_vae.safetensors",
        tmp_path / "text_encoders" / "umt5_xxl_fp16.safetensors",
        tmp_path / "text_encoders" / "umt5-xxl-tokenizer",
    ]
    tokenizer = todo[-1][1]
    assert tokenizer.repo_id == TOKENIZER_REPO and tokenizer.files == ("tokenizer/*",)


def test_each_variant_takes_the_vae_its_latents_need() -> None:
    assert expand(["ti2v-5b"]) == ["model-ti2v-5b", "vae-2.2", "text_encoder", "tokenizer"]
    assert DOWNLOADS.targets["vae-2.2"].repo_id == COMFY_22
    pair = expand(["t2v-a14b"])
    assert pair[:2] == ["model-t2v-a14b-high", "model-t2v-a14b-low"] and "vae" in pair
    assert "clip_vision" in expand(["i2v-14b-480p"])
    assert "clip_vision" not in expand(["i2v-a14b"])  # A14B's image-to-video has no image embedder
    for name in expand(["t2v-14b", "i2v-14b-480p"]):
        if name.startswith("model-"):
            assert DOWNLOADS.targets[name].repo_id == COMFY_21
    with pytest.raises(ValueError, match="unknown download target"):
        expand(["wan3"])


def test_diffusers_targets_are_whole_folders_with_every_part(tmp_path: Path) -> None:
    [(_, target)] = plan(["diffusers-t2v-a14b"], tmp_path)
    assert target.layout == "diffusers" and target.folder == "Wan2.2-T2V-A14B-Diffusers"
    assert {"transformer/*", "transformer_2/*", "tokenizer/*"} <= set(target.files)
    assert set(target.roles) == {"diffusion_model", "vae", "text_encoder", "tokenizer"}
    i2v = DOWNLOADS.targets["diffusers-i2v-14b-480p"]
    assert "image_encoder/*" in i2v.files and "image_encoder" in i2v.roles
    folders = {t.folder for t in DOWNLOADS.targets.values() if t.layout == "diffusers"}
    assert len(folders) == 6  # one folder per repo: none lands on another


def test_the_tokenizer_lands_where_the_family_finds_it(wan_kit: WanKit, tmp_path: Path) -> None:
    """A repo's `tokenizer/` folder downloaded into the target's folder is found for a
    single-file UMT5 (the resolver's tokenizer rule), as a subfolder source."""
    assert wan_kit.tokenizer_dir is not None and wan_kit.text_encoder_file is not None
    models = tmp_path / "models"
    landed = DOWNLOADS.targets["tokenizer"].destination(models) / "tokenizer"
    landed.mkdir(parents=True)
    for file in wan_kit.tokenizer_dir.iterdir():
        (landed / file.name).write_bytes(file.read_bytes())
    resolver = StackResolver(RULES, Catalog(models), {})
    found = resolver.tokenizer_for(Source(wan_kit.text_encoder_file))
    assert found == Source(landed.parent, "tokenizer")


def test_cli_dry_run_prints_the_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--models", str(tmp_path), "--dry-run", "tokenizer"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["downloads"] == [
        {
            "target": "tokenizer",
            "repo": TOKENIZER_REPO,
            "files": ["tokenizer/*"],
            "to": str(tmp_path / "text_encoders" / "umt5-xxl-tokenizer"),
        }
    ]
