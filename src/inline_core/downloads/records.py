"""A download as it is kept: the repo and commit, where its files land, each file's size and hash
as the hub published them at submit, its status. Where bytes stand is not kept here: a partial
file's size is the truth, so a restart resumes from the disk, not from a record.
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from inline_core.downloads.remote import RemoteFile

Status = Literal["queued", "running", "done", "error", "cancelled"]
FINISHED: frozenset[str] = frozenset({"done", "error", "cancelled"})
STAGING = ".downloads"  # hidden in each category folder (the catalog skips dot-names)
PARTIAL_SUFFIX = ".partial"


def new_download_id() -> str:
    """Time-ordered (the listing sorts by it) and unguessable."""
    return f"dl_{time.time_ns():x}{secrets.token_hex(4)}"


@dataclass
class FileRecord:
    path: str  # in the repo
    dest: str  # where it lands, relative to the download's landing folder
    size: int
    sha256: str | None
    blob_id: str | None
    done: bool = False  # verified (and, without a folder, in the catalog)

    @property
    def remote(self) -> RemoteFile:
        return RemoteFile(self.path, self.size, self.sha256, self.blob_id)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "dest": self.dest,
            "size": self.size,
            "sha256": self.sha256,
            "blobId": self.blob_id,
            "done": self.done,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> FileRecord:
        return cls(
            str(raw["path"]),
            str(raw["dest"]),
            int(raw["size"]),
            cast(str | None, raw.get("sha256")),
            cast(str | None, raw.get("blobId")),
            bool(raw.get("done")),
        )


@dataclass
class DownloadRecord:
    id: str
    repo: str
    revision: str | None  # as asked (None: the default branch)
    commit: str  # as resolved at submit: every byte comes from this commit
    category: str
    folder: str | None  # None: each file lands by its own name in the category folder
    files: list[FileRecord]
    status: Status = "queued"
    created_at: float = field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None
    error: dict[str, str] | None = None  # {code, message}

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    @property
    def bytes_total(self) -> int:
        return sum(f.size for f in self.files)

    def landing(self, models: Path) -> Path:
        """The folder its files land in: the category's, or its own folder inside it."""
        base = models / self.category
        return base / self.folder if self.folder is not None else base

    def destinations(self, models: Path) -> list[Path]:
        """What appears in the catalog when it is done: its folder, or each file."""
        if self.folder is not None:
            return [self.landing(models)]
        return [self.landing(models) / f.dest for f in self.files]

    def staging(self, models: Path) -> Path:
        """Its own hidden folder beside where it lands (same disk, so a move is a rename)."""
        return models / self.category / STAGING / self.id

    def partial(self, models: Path, file: FileRecord) -> Path:
        return self.staging(models) / (file.dest + PARTIAL_SUFFIX)

    def bytes_on_disk(self, models: Path, file: FileRecord) -> int:
        if file.done:
            return file.size
        try:
            return os.stat(self.partial(models, file)).st_size
        except OSError:
            return 0

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "repo": self.repo,
            "revision": self.revision,
            "commit": self.commit,
            "category": self.category,
            "folder": self.folder,
            "files": [f.to_json() for f in self.files],
            "status": self.status,
            "createdAt": self.created_at,
            "startedAt": self.started_at,
            "finishedAt": self.finished_at,
            "error": self.error,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> DownloadRecord:
        status = str(raw["status"])
        if status not in ("queued", "running", "done", "error", "cancelled"):
            raise ValueError(f"unknown status {status!r}")
        files = cast(list[dict[str, Any]], raw["files"])
        return cls(
            id=str(raw["id"]),
            repo=str(raw["repo"]),
            revision=cast(str | None, raw.get("revision")),
            commit=str(raw["commit"]),
            category=str(raw["category"]),
            folder=cast(str | None, raw.get("folder")),
            files=[FileRecord.from_json(f) for f in files],
            status=status,
            created_at=float(raw["createdAt"]),
            started_at=cast(float | None, raw.get("startedAt")),
            finished_at=cast(float | None, raw.get("finishedAt")),
            error=cast(dict[str, str] | None, raw.get("error")),
        )
