"""Scratch folders: the sweep takes only those no live process holds, and leaves a folder that
may be in the making (no owner file yet, and young) alone."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from inline_core.packs.scratch import OWNER, UNOWNED_GRACE_S, make_scratch, sweep_scratch

HOLD = """
import sys, time
from pathlib import Path
from inline_core.packs.scratch import make_scratch
scratch = make_scratch("held", Path(sys.argv[1]))
print(scratch.path, flush=True)
time.sleep(600)
"""


def test_the_sweep_removes_orphans_only(tmp_path: Path) -> None:
    mine = make_scratch("mine", tmp_path)  # held by this process
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        held = Path(holder.stdout.readline().strip())  # held by another live process
        orphan = make_scratch("orphan", tmp_path)
        os.close(orphan.owner_fd)  # as if its server died: the lock goes with the process
        young = tmp_path / "inline-pack-young-abc"  # no owner file yet: maybe being made
        young.mkdir()
        old = tmp_path / "inline-pack-old-def"  # no owner file, long past the grace period
        old.mkdir()
        past = time.time() - UNOWNED_GRACE_S - 10
        os.utime(old, (past, past))
        other = tmp_path / "not-a-pack"
        other.mkdir()

        assert sweep_scratch(tmp_path) == 2
        assert not orphan.path.exists() and not old.exists()
        assert mine.path.is_dir() and held.is_dir() and young.is_dir() and other.is_dir()
        assert (held / OWNER).exists()
        holder.kill()
        holder.wait(timeout=30)
        assert sweep_scratch(tmp_path) == 1  # its holder is gone now
        assert not held.exists() and mine.path.is_dir()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=30)
        mine.remove()
    assert not mine.path.exists()
