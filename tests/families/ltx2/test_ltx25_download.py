"""LTX-2.5's download entries (`download.py` cites where each name comes from): its diffusers
repo lands as one folder the family's resolver reads and tells as 2.5, and the latent upsampler
file lands flat in `latent_upscale_models/` under the name ComfyUI's templates load it by (no
network here)."""

from __future__ import annotations

import shutil
from pathlib import Path

from inline_core.contract.files import StackResolver
from inline_core.families.ltx2.download import REPO_2_5, REPO_2_5_DIFFUSERS, plan
from inline_core.families.ltx2.files import RULES
from inline_core.families.ltx2.kit import LTX2Kit
from inline_core.families.ltx2.ltx25 import DECODER_SUBFOLDER, check_ltx25
from inline_core.models.catalog import Catalog

UPSAMPLER = "ltx-2.5-latent-spatial-upscaler-x2-bf16-1.0.safetensors"  # the template's name


def test_the_ltx25_preset_is_the_diffusers_folder_and_the_upsampler(tmp_path: Path) -> None:
    targets = dict(plan(["ltx-2.5"], tmp_path))
    assert set(targets) == {"diffusers_2_5", "upscaler_2_5"}
    folder, upsampler = targets["diffusers_2_5"], targets["upscaler_2_5"]
    assert folder.repo_id == REPO_2_5_DIFFUSERS and folder.layout == "diffusers"
    assert folder.destination(tmp_path) == tmp_path / "diffusion_models" / "LTX-2.5-Diffusers"
    parts = ("transformer", "vae", "audio_vae", "vocoder", "connectors", "text_encoder")
    wanted = {f"{part}/*" for part in (*parts, "tokenizer", "scheduler", DECODER_SUBFOLDER)}
    assert wanted <= set(folder.files) and "model_index.json" in folder.files
    assert upsampler.repo_id == REPO_2_5
    assert upsampler.destination(tmp_path) == tmp_path / "latent_upscale_models" / UPSAMPLER


def test_what_lands_is_an_ltx25_stack_the_resolver_reads(
    ltx25_kit: LTX2Kit, tmp_path: Path
) -> None:
    target = dict(plan(["diffusers_2_5"], tmp_path))["diffusers_2_5"]
    landed = target.destination(tmp_path)
    shutil.copytree(ltx25_kit.diffusers_dir, landed)
    found = StackResolver(RULES, Catalog(tmp_path), {}).resolve()
    assert found.sources is not None, found.missing
    assert found.sources.model_name == "LTX-2.5-Diffusers"
    transformer, encoder = found.sources.get("transformer"), found.sources.get("text_encoder")
    assert check_ltx25(transformer, encoder, "l") == landed / DECODER_SUBFOLDER
