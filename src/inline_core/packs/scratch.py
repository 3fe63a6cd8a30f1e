"""A pack worker's scratch folder, and the start-up sweep of those a killed server left behind.

Scratch folders live in shared memory where there is some (media files cost no disk there), so a
folder left by a server killed with -9 would hold memory until the machine restarts. Each one is
owned through an exclusive `flock` on its `.owner` file, held by the server for the worker's life:
the kernel drops it when that server dies, however it dies. A sweep removes the folders whose lock
it can take, so it never touches a live server's (several servers may share one machine) and
never trusts a pid that may have been reused.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

PREFIX = "inline-pack-"
OWNER = ".owner"
# A folder without its owner file yet may be one another server is making this moment.
UNOWNED_GRACE_S = 60.0


def scratch_root() -> Path:
    """Shared memory where there is some, else the temp dir."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return shm
    return Path(tempfile.gettempdir())


@dataclass
class Scratch:
    path: Path
    owner_fd: int  # holds the folder's lock while open

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        try:
            os.close(self.owner_fd)
        except OSError:
            pass


def make_scratch(pack: str, root: Path | None = None) -> Scratch:
    """A new scratch folder for `pack`'s worker, locked by this process."""
    path = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{pack}-", dir=root or scratch_root()))
    try:
        fd = os.open(path / OWNER, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        shutil.rmtree(path, ignore_errors=True)
        raise
    return Scratch(path, fd)


def sweep_scratch(root: Path | None = None) -> int:
    """Remove the scratch folders no live process holds; how many were removed."""
    removed = 0
    base = root or scratch_root()
    try:
        entries = list(base.iterdir())
    except OSError:
        return 0
    for entry in entries:
        if not entry.name.startswith(PREFIX) or entry.is_symlink() or not entry.is_dir():
            continue
        if _orphaned(entry):
            shutil.rmtree(entry, ignore_errors=True)
            removed += not entry.exists()
    if removed:
        log.info("removed %d pack scratch folders left by stopped servers in %s", removed, base)
    return removed


def _orphaned(folder: Path) -> bool:
    try:
        fd = os.open(folder / OWNER, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        try:
            age = time.time() - folder.stat().st_mtime
        except OSError:
            return False
        return age > UNOWNED_GRACE_S
    except OSError:
        return False  # not ours to judge (another user's, say)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False  # its server holds it
    finally:
        os.close(fd)
    return True
