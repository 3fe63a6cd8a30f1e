"""The downloads' durable records: one JSON file per download in `<models>/.downloads/`, written
atomically and fsynced before a client hears of it.

Kept with the models folder rather than in the run store: a download fills one server's models
folder (several servers sharing a PostgreSQL store each have their own), so its record belongs
beside the files it writes, whichever store the runs use. A download is worked on by one process
at a time: the worker holds an advisory lock on `<id>.lock` (a server and `inline-core download`
over one folder never fetch the same file twice).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
from pathlib import Path
from typing import Any, cast

from inline_core.downloads.records import DownloadRecord

log = logging.getLogger(__name__)

RECORDS = ".downloads"


class Held:
    """An advisory lock on one download, released by `release` (or by the process's death)."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None


class DownloadStore:
    def __init__(self, models: Path) -> None:
        self.root = models / RECORDS

    def _path(self, download_id: str) -> Path:
        return self.root / f"{download_id}.json"

    def save(self, record: DownloadRecord) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        path = self._path(record.id)
        temp = path.with_suffix(".json.tmp")
        data = json.dumps(record.to_json(), separators=(",", ":")).encode()
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        created = not path.exists()
        os.replace(temp, path)
        if created:  # the new name itself must survive a crash
            dir_fd = os.open(self.root, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)

    def load_all(self) -> list[DownloadRecord]:
        """Every record, oldest first (ids are time-ordered); unreadable ones are logged."""
        if not self.root.is_dir():
            return []
        records: list[DownloadRecord] = []
        for path in sorted(self.root.glob("dl_*.json")):
            try:
                raw = cast(dict[str, Any], json.loads(path.read_text(encoding="utf-8")))
                records.append(DownloadRecord.from_json(raw))
            except (OSError, ValueError, KeyError, TypeError):
                log.warning("skipping the unreadable download record %s", path)
        return records

    def hold(self, download_id: str) -> Held | None:
        """The lock on a download, or None while another process holds it."""
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / f"{download_id}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        return Held(fd)
