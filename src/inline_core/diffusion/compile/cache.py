"""Inductor's compiled code kept in the data folder, so a restart finds it instead of compiling
again (torch-free: it only sets `TORCHINDUCTOR_CACHE_DIR` before anything compiles)."""

from __future__ import annotations

import os
from pathlib import Path

from inline_core.diffusion.compile.progress import BOARD

CACHE_VARIABLE = "TORCHINDUCTOR_CACHE_DIR"


def keep_cache_in(data_dir: Path) -> str:
    """Point inductor's cache at `<data_dir>/compile-cache`, unless the user set one; the folder
    in use."""
    folder = os.environ.get(CACHE_VARIABLE) or str(data_dir / "compile-cache")
    os.environ[CACHE_VARIABLE] = folder
    BOARD.cache_dir = folder
    return folder
