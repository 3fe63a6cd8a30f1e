"""What the hub publishes about a repo's files (torch-free, and free of huggingface_hub, so the
records import without it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RemoteFile:
    path: str  # in the repo
    size: int
    sha256: str | None  # the LFS object id (None: a file kept in git itself)
    blob_id: str | None  # its git blob id, what the hub publishes for a file outside LFS


@dataclass(frozen=True)
class Listing:
    repo: str
    commit: str  # the revision resolved: fetched at this commit, a resume gets the same bytes
    gated: bool
    files: dict[str, RemoteFile]
