"""SkyReels-V2's download table: Skywork's diffusion-forcing diffusers repos land as folders
holding every part (as Wan's diffusers repos do), and what lands is what the family's resolver
reads (no network here)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from inline_core.contract.files import StackResolver
from inline_core.families.skyreels.download import DOWNLOADS, expand, main, plan
from inline_core.families.skyreels.files import RULES
from inline_core.families.skyreels.kit import SkyReelsKit
from inline_core.models.catalog import Catalog

DEFAULT_REPO = "Skywork/SkyReels-V2-DF-1.3B-540P-Diffusers"
DEFAULT_FOLDER = "SkyReels-V2-DF-1.3B-540P-Diffusers"


def test_the_default_is_the_smallest_df_model_as_a_whole_folder(tmp_path: Path) -> None:
    [(name, target)] = plan([], tmp_path)
    assert name == "diffusers-df-1.3b-540p" and target.repo_id == DEFAULT_REPO
    assert target.layout == "diffusers"
    assert target.destination(tmp_path) == tmp_path / "diffusion_models" / DEFAULT_FOLDER
    parts = ("transformer", "vae", "text_encoder", "tokenizer", "scheduler")
    assert {f"{part}/*" for part in parts} <= set(target.files)
    assert "model_index.json" in target.files
    assert set(target.roles) == {"diffusion_model", "vae", "text_encoder", "tokenizer"}
    folders = {t.folder for t in DOWNLOADS.targets.values()}
    assert len(folders) == len(DOWNLOADS.targets)  # none lands on another
    assert expand(["df-14b-720p"]) == ["diffusers-df-14b-720p"]
    with pytest.raises(ValueError, match="unknown download target"):
        expand(["t2v-14b"])  # the non-DF models are not this family's


def test_what_lands_is_the_stack_the_resolver_reads(
    skyreels_kit: SkyReelsKit, tmp_path: Path
) -> None:
    [(_, target)] = plan([], tmp_path)
    shutil.copytree(skyreels_kit.diffusers_dir, target.destination(tmp_path))
    found = StackResolver(RULES, Catalog(tmp_path), {}).resolve()
    assert found.sources is not None, found.missing
    assert found.sources.model_name == DEFAULT_FOLDER
    for part in ("vae", "text_encoder", "tokenizer"):
        source = found.sources.get(part)
        assert source is not None and source.subfolder == part


def test_cli_dry_run_prints_the_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--models", str(tmp_path), "--dry-run"]) == 0
    [planned] = json.loads(capsys.readouterr().out)["downloads"]
    assert planned["repo"] == DEFAULT_REPO
    assert planned["to"] == str(
        tmp_path / "diffusion_models" / "SkyReels-V2-DF-1.3B-540P-Diffusers"
    )
