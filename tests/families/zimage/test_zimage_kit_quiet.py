"""`inline-core kit` (the real command) prints what it wrote, not the libraries' import noise:
torchao's kernels that a CPU cannot load, torch's notes on torchao's enums, diffusers' note that
torchao's tensors cannot be imported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

NOISE = ("torchao", "_pytree", "Failed to load", "Enum subclass")


def test_kit_prints_no_library_noise(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "inline_core.cli", "kit", "--out", str(tmp_path / "models")],
        env={k: v for k, v in os.environ.items() if not k.startswith("INLINE_")},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    for noise in NOISE:
        assert noise not in done.stderr and noise not in done.stdout, done.stderr
    assert (tmp_path / "models" / "diffusion_models").is_dir()
