"""Evicting model files from the page cache, as after a reboot: for the cold-start test of kept
weights and the real-size benches (bench/real_size.py), which read their files cold."""

from __future__ import annotations

import os
from pathlib import Path


def drop_from_page_cache(root: Path) -> None:
    """Evict the pages of every safetensors file below `root` (no root privileges needed)."""
    for file in root.rglob("*.safetensors"):
        fd = os.open(file, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
