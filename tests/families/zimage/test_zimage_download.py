"""The explicit download command's targets and argument handling (no network here: a hub that
cannot be reached is what the command meets)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
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
    assert name == "diffusers" and target.repo_id == DIFFUSERS_REPO and target.file is None
    assert target.destination(tmp_path) == tmp_path / "diffusion_models" / "Z-Image-Turbo"
    with pytest.raises(ValueError, match="unknown download target"):
        expand(["nope"])


def test_present_files_are_skipped_unless_forced(tmp_path: Path) -> None:
    (tmp_path / "vae").mkdir()
    (tmp_path / "vae" / "ae.safetensors").write_bytes(b"x")
    assert [n for n, _ in plan(["comfy"], tmp_path)] == ["diffusion_model", "text_encoder"]
    assert len(plan(["comfy"], tmp_path, force=True)) == 3


def test_cli_dry_run_prints_the_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--models", str(tmp_path), "--dry-run", "vae"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["downloads"] == [
        {
            "target": "vae",
            "repo": COMFY_REPO,
            "file": "split_files/vae/ae.safetensors",
            "to": str(tmp_path / "vae" / "ae.safetensors"),
        }
    ]
    with pytest.raises(SystemExit):
        main(["--models", str(tmp_path), "bogus"])


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens there once closed


def test_without_a_network_it_says_so_in_one_line(tmp_path: Path) -> None:
    """The real command against a hub that cannot be reached: one line, no traceback, naming
    where to put the file instead."""
    env = {**os.environ, "HF_ENDPOINT": f"http://127.0.0.1:{closed_port()}"}
    env.pop("HF_HUB_OFFLINE", None)
    done = subprocess.run(
        [sys.executable, "-m", "inline_core.cli", "download", "--models", str(tmp_path), "vae"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith("inline-core download: cannot fetch Comfy-Org/z_image_turbo/")
    assert f"copy the file from elsewhere to {tmp_path / 'vae' / 'ae.safetensors'}" in lines[0]
    assert not (tmp_path / "vae" / "ae.safetensors").exists()


def test_help_lists_the_components_the_folder_and_sizes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "the models folder (./models)" in out
    for name in ("diffusion_model", "vae", "text_encoder", "diffusers", "comfy"):
        assert f"  {name} " in out
    assert "about 12.3 GB" in out and "about 335 MB" in out
