"""`inline-core download` as a user meets it: its help says what it fetches, where and how much;
a hub it cannot reach is one line and where to put the files by hand, never a traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path


def download(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "inline_core.cli", "download", *args],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_help_lists_every_target_its_folder_and_its_size() -> None:
    done = download("--help")
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "into models/" in text and "--models DIR" in text
    assert "comfy (the default): diffusion_model + vae + text_encoder, about 20.6 GB" in text
    assert "-> models/text_encoders/qwen_3_4b.safetensors" in text
    assert "text_encoder: Comfy-Org/z_image_turbo, about 8.0 GB" in text


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens once it is closed


def test_a_hub_out_of_reach_is_one_line_and_where_to_put_the_files(tmp_path: Path) -> None:
    hub = f"http://127.0.0.1:{closed_port()}"
    done = download("vae", "--models", str(tmp_path), env={"HF_ENDPOINT": hub})
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert "Traceback" not in done.stderr
    assert lines[0].startswith(f"inline-core download: cannot reach the hub at {hub}")
    assert lines[1] == (
        "  or fetch split_files/vae/ae.safetensors from Comfy-Org/z_image_turbo yourself into "
        f"{tmp_path}/vae/"
    )
    assert not any((tmp_path / "vae").glob("ae.safetensors*"))  # nothing half-written left
