"""`FileTakeStore`: takes as files under the data dir, written atomically and named by id."""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from inline_core.errors import InlineError, InsufficientStorage, RunFailed
from inline_core.media import MediaKind
from inline_core.runtime.disk_space import describe_free, is_disk_full
from inline_core.runtime.media_facts import media_facts
from inline_core.sizes import human_size
from inline_core.takes import Take

# Prefix of the temp file a write goes through; a file still named so at start-up is garbage.
TEMP_PREFIX = ".tmp-"


def take_id_for(run_id: str, node_id: str, index: int) -> str:
    digest = hashlib.sha256(f"{run_id}\0{node_id}\0{index}".encode()).hexdigest()
    return f"tk_{digest[:24]}"


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` so a reader sees either nothing or the whole file. On any failure
    (a full disk included) the temp file is removed and `path` is left as it was."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=TEMP_PREFIX, suffix=path.suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        # Never let a failing cleanup hide the error that matters; a temp file it leaves is
        # removed at the next start (see server/bootstrap.sweep_leftovers).
        with contextlib.suppress(OSError):
            Path(tmp).unlink(missing_ok=True)
        raise
    _sync_folder(path.parent)


def link_atomic(source: Path, path: Path) -> None:
    """Make `path` a second name of `source`'s file (takes are immutable, so both may share it):
    a reader sees either nothing or the whole file. Raises OSError where the file system has no
    hard links or `source` is on another device; `path` is then left as it was."""
    tmp = path.with_name(f"{TEMP_PREFIX}{uuid.uuid4().hex}{path.suffix}")
    os.link(source, tmp)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise
    _sync_folder(path.parent)


def _sync_folder(folder: Path) -> None:
    dir_fd = os.open(folder, os.O_RDONLY)
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
        try:
            write_atomic(path, data)
        except OSError as exc:
            raise self._write_error(exc, take_id, node_id, len(data)) from exc
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
            facts=media_facts(data, suffix, kind),
        )

    def reissue(self, take: Take, *, run_id: str, node_id: str, index: int) -> Take:
        """A cache hit's take for this run: a hard link to the cached file (no bytes read,
        hashed or written again: at 1024 px that was most of a cached render's server time), or
        a copy where the file system cannot link it."""
        source = Path(take.path)
        take_id = take_id_for(run_id, node_id, index)
        path = self.path_for(take_id, source.suffix)
        try:
            link_atomic(source, path)
        except OSError:  # no hard links here, another device, or the cached file is gone
            return self.write(
                run_id=run_id,
                node_id=node_id,
                index=index,
                kind=take.kind,
                data=source.read_bytes(),
                suffix=source.suffix,
                params=take.params,
            )
        return Take(
            id=take_id,
            run_id=run_id,
            node_id=node_id,
            kind=take.kind,
            uri=f"/v1/takes/{take_id}/bytes",
            hash=take.hash,
            params=dict(take.params),
            created_at=time.time(),
            path=str(path),
            facts=take.facts,
        )

    def _write_error(self, exc: OSError, take_id: str, node_id: str, size: int) -> InlineError:
        """What the run reports when a take cannot be written: a full disk says so plainly."""
        if is_disk_full(exc):
            return InsufficientStorage(
                f"the disk holding the takes ({self.root}) is full: take {take_id} of node "
                f"{node_id!r} ({human_size(size)}) could not be written "
                f"({describe_free(self.root)}); "
                "free some space and run it again",
                node_id=node_id,
            )
        reason = exc.strerror or type(exc).__name__
        return RunFailed(
            f"could not write take {take_id} of node {node_id!r} under {self.root}: {reason}",
            node_id=node_id,
        )
