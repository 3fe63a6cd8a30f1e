"""`FileTakeStore`: takes as files under the data dir, written atomically and named by id."""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from inline_core.media import MediaKind
from inline_core.takes import Take


def take_id_for(run_id: str, node_id: str, index: int) -> str:
    digest = hashlib.sha256(f"{run_id}\0{node_id}\0{index}".encode()).hexdigest()
    return f"tk_{digest[:24]}"


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` so a reader sees either nothing or the whole file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class FileTakeStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def path_for(self, take_id: str, suffix: str) -> Path:
        return self.root / f"{take_id}{suffix}"

    def write(
        self,
        *,
        run_id: str,
        node_id: str,
        index: int,
        kind: MediaKind,
        data: bytes,
        suffix: str,
        params: Mapping[str, Any],
    ) -> Take:
        take_id = take_id_for(run_id, node_id, index)
        path = self.path_for(take_id, suffix)
        write_atomic(path, data)
        return Take(
            id=take_id,
            run_id=run_id,
            node_id=node_id,
            kind=kind,
            uri=f"/v1/takes/{take_id}/bytes",
            hash="sha256-" + hashlib.sha256(data).hexdigest(),
            params=dict(params),
            created_at=time.time(),
            path=str(path),
        )
