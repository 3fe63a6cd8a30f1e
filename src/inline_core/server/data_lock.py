"""One data folder, one server: an exclusive OS lock taken before the run store is opened.

The lock is `flock` on a file in the data folder, held for the life of the process: the kernel
drops it when the process ends, however it ends (kill -9 included), so a crash never leaves a
stale lock behind and a restart needs no clean-up. The holder writes its PID into the file, so a
second server refuses naming it.

What is locked depends on the store:
- SQLite (the default): the whole data folder (`server.lock`). `runs.db` is one server's, and a
  second server's start-up recovery would otherwise re-queue the first one's running runs.
- PostgreSQL (`INLINE_DATABASE_URL`): the data folder is shared by design (takes and assets of
  every server), so only one server *name* is locked (`servers/<server id>.lock`), and only when
  the name was given: a restarted server takes back the runs held under its name at once, which
  is safe only while no live process runs under that name. A generated name is unique anyway.

A file system that cannot lock (some network or FUSE mounts) gets a warning, not a refusal.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from inline_core.config import Config
from inline_core.errors import InvalidRequest

log = logging.getLogger(__name__)

LOCK_NAME = "server.lock"
SERVER_LOCKS = "servers"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


class DataFolderBusy(InvalidRequest):
    """Another live server holds the lock (a start-up refusal, exit 2)."""


def lock_path(config: Config) -> Path | None:
    """The lock file `config` needs, or None (a shared store under a generated server name)."""
    if config.database_url is None:
        return config.data_dir / LOCK_NAME
    if config.server_id is None:
        return None
    return config.data_dir / SERVER_LOCKS / f"{_UNSAFE.sub('_', config.server_id)}.lock"


@dataclass
class DataLock:
    path: Path
    fd: int | None

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the only descriptor drops the flock
            self.fd = None


def holder_pid(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def usable_folder(folder: Path) -> Path:
    """Create the data folder if needed; a clear refusal when this user cannot write there."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidRequest(
            f"cannot create the data folder {folder.absolute()}: {exc.strerror or exc}; pass "
            "--data-dir (INLINE_DATA_DIR) a folder this user can write"
        ) from exc
    if not folder.is_dir():
        raise InvalidRequest(f"the data folder {folder.absolute()} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InvalidRequest(
            f"the data folder {folder.absolute()} is not writable by this user; pass "
            "--data-dir (INLINE_DATA_DIR) a folder it can write, or fix its permissions"
        )
    return folder


def acquire_data_lock(config: Config) -> DataLock | None:
    """Take the lock `config` needs (see the module's docstring); None when it needs none.

    Raises `DataFolderBusy` when another live process holds it, `InvalidRequest` when the data
    folder cannot be used at all."""
    usable_folder(config.data_dir)
    path = lock_path(config)
    if path is None:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # os.open's descriptors are not inherited: a rank or pack worker never keeps the lock.
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise InvalidRequest(
            f"cannot create the lock file {path.absolute()}: {exc.strerror or exc}; pass "
            "--data-dir (INLINE_DATA_DIR) a folder this user can write"
        ) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise DataFolderBusy(_busy_message(config, path)) from exc
        log.warning(
            "the file system of %s cannot lock files (%s): nothing stops a second server from "
            "using the same %s",
            path.parent.absolute(),
            exc.strerror or exc,
            "data folder" if config.database_url is None else "server id",
        )
        return DataLock(path, None)
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return DataLock(path, fd)


def _busy_message(config: Config, path: Path) -> str:
    pid = holder_pid(path)
    holder = f"PID {pid}" if pid is not None else "a process whose PID it did not write"
    if config.database_url is None:
        return (
            f"another Inline Core server ({holder}) is using the data folder "
            f"{config.data_dir.absolute()}: one folder serves one server. Stop that server, or "
            "pass another --data-dir (INLINE_DATA_DIR)"
        )
    return (
        f"another Inline Core server ({holder}) is running as server id {config.server_id!r} "
        f"on {config.data_dir.absolute()}: give each server its own --server-id"
    )
