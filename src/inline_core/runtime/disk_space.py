"""Free space on the disk that holds a folder, and telling a full disk from other write errors."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

from inline_core.sizes import human_size

MB = 1024 * 1024
# A quota running out is the same problem for the user as the disk filling up.
_DISK_FULL = frozenset({errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)})


def free_bytes(folder: Path) -> int:
    """Bytes an unprivileged process may still write on the disk that holds `folder`."""
    return shutil.disk_usage(folder).free


def is_disk_full(exc: OSError) -> bool:
    return exc.errno in _DISK_FULL


def describe_free(folder: Path) -> str:
    """E.g. "123.4 MiB free", for messages; never raises (the disk may be failing too)."""
    try:
        return f"{human_size(free_bytes(folder))} free"
    except OSError:
        return "free space unknown"
