"""LTX-2's download table: Lightricks' diffusers repo lands as one folder holding every part, and
what lands is what the family's resolver reads (no network here)."""

from __future__ import annotations

import shutil
from pathlib import Path

from inline_core.contract.files import StackResolver
from inline_core.families.ltx2.download import REPO, plan
from inline_core.families.ltx2.files import RULES
from inline_core.families.ltx2.kit import LTX2Kit
from inline_core.models.catalog import Catalog


def test_the_default_is_the_diffusers_folder_with_every_part(tmp_path: Path) -> None:
    [(name, target)] = plan([], tmp_path)
    assert name == "diffusers" and target.repo_id == REPO and target.layout == "diffusers"
    assert target.destination(tmp_path) == tmp_path / "diffusion_models" / "LTX-2"
    parts = ("transformer", "vae", "audio_vae", "vocoder", "connectors", "text_encoder")
    assert {f"{part}/*" for part in (*parts, "tokenizer", "scheduler")} <= set(target.files)
    assert "model_index.json" in target.files


def test_what_lands_is_the_stack_the_resolver_reads(ltx2_kit: LTX2Kit, tmp_path: Path) -> None:
    [(_, target)] = plan([], tmp_path)
    shutil.copytree(ltx2_kit.diffusers_dir, target.destination(tmp_path))
    found = StackResolver(RULES, Catalog(tmp_path), {}).resolve()
    assert found.sources is not None, found.missing
    assert found.sources.model_name == "LTX-2"
    for part in ("vae", "audio_vae", "vocoder", "connectors", "text_encoder", "tokenizer"):
        source = found.sources.get(part)
        assert source is not None and source.subfolder == part
