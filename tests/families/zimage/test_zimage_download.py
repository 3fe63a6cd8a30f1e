"""The explicit download command's targets and argument handling (no network here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inline_core.families.zimage.download import COMFY_REPO, DIFFUSERS_REPO, expand, main, plan


def test_default_preset_is_the_three_comfy_files(tmp_path: Path) -> None:
    todo = plan([], tmp_path)
    assert [name for name, _ in todo] == ["diffusion_model", "vae", "text_encoder"]
    assert {t.repo_id for _, t in todo} == {COMFY_REPO}
    dests = [t.destination(tmp_path) for _, t in todo]
    assert dests == [
        tmp_path / "diffusion_models" / "z_image_turbo_bf16.safetensors",
        tmp_path / "vae" / "ae.safetensors",
        tmp_path / "text_encoders" / "qwen_3_4b.safetensors",
    ]


def test_diffusers_target_is_a_folder_and_presets_dedupe(tmp_path: Path) -> None:
    assert expand(["vae", "comfy", "vae"]) == ["vae", "diffusion_model", "text_encoder"]
    [(name, target)] = plan(["diffusers"], tmp_path)
    assert name == "diffusers" and target.repo_id == DIFFUSERS_REPO
    assert target.folder == "Z-Image-Turbo" and "vae/*" in target.files
    assert target.destination(tmp_path) == tmp_path / "diffusion_models" / "Z-Image-Turbo"
    assert set(target.roles) == {"diffusion_model", "vae", "text_encoder", "tokenizer"}
    with pytest.raises(ValueError, match="unknown download target"):
        expand(["nope"])


def test_present_files_are_skipped_unless_forced(tmp_path: Path) -> None:
    (tmp_path / "vae").mkdir()
    (tmp_path / "vae" / "ae.safetensors").write_bytes(b"x")
    assert [n for n, _ in plan(["comfy"], tmp_path)] == ["diffusion_model", "text_encoder"]
    assert len(plan(["comfy"], tmp_path, force=True)) == 3


def test_each_target_is_a_download_request_body() -> None:
    [(name, target)] = plan(["vae"], Path("/nowhere"))
    assert name == "vae" and target.request() == {
        "repo": COMFY_REPO,
        "files": ["split_files/vae/ae.safetensors"],
        "category": "vae",
    }


def test_cli_dry_run_prints_the_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--models", str(tmp_path), "--dry-run", "vae"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["downloads"] == [
        {
            "target": "vae",
            "repo": COMFY_REPO,
            "files": ["split_files/vae/ae.safetensors"],
            "to": str(tmp_path / "vae" / "ae.safetensors"),
        }
    ]
    with pytest.raises(SystemExit):
        main(["--models", str(tmp_path), "bogus"])
