"""A download request checked and planned against the repo's listing: which files (patterns
expanded), where each lands, and how much room that takes. Everything here is a 4xx before any
byte is fetched."""

from __future__ import annotations

import fnmatch
import posixpath
import shutil
from collections.abc import Sequence
from pathlib import Path

from inline_core.downloads.records import FileRecord
from inline_core.downloads.remote import Listing
from inline_core.errors import InsufficientStorage, InvalidRequest, NotFound
from inline_core.models.catalog import CATEGORIES
from inline_core.sizes import human_size

MAX_FILES = 10_000


def check_request(category: str, folder: str | None, files: Sequence[str]) -> None:
    if category not in CATEGORIES:
        known = ", ".join(CATEGORIES)
        raise InvalidRequest(f"'category' must be one of {known}; got {category!r}")
    if folder is not None and not _plain_name(folder):
        raise InvalidRequest(
            f"'folder' must be a plain folder name (no '/', '..' or leading '.'); got {folder!r}"
        )
    if not files:
        raise InvalidRequest("'files' must name at least one file of the repo")
    if len(files) > MAX_FILES:
        raise InvalidRequest(f"'files' may name at most {MAX_FILES} files")
    for name in files:
        if not _safe_repo_path(name):
            raise InvalidRequest(f"{name!r} is not a file path inside a repo")


def plan_files(listing: Listing, patterns: Sequence[str], folder: str | None) -> list[FileRecord]:
    """The repo's files the patterns name, in listing order, each with where it lands: by its
    own name without a folder, by its repo path inside one."""
    chosen: list[str] = []
    for pattern in patterns:
        matched = [p for p in listing.files if p == pattern or fnmatch.fnmatchcase(p, pattern)]
        if not matched:
            at = listing.commit[:12]
            raise NotFound(f"repo {listing.repo!r} at {at} has no file {pattern!r}")
        chosen += [p for p in matched if p not in chosen]
    planned: list[FileRecord] = []
    landed: dict[str, str] = {}
    for path in chosen:
        remote = listing.files[path]
        dest = path if folder is not None else posixpath.basename(path)
        if dest in landed:
            raise InvalidRequest(
                f"{landed[dest]!r} and {path!r} would both land as {dest!r}; download them into "
                "a 'folder', or one at a time"
            )
        landed[dest] = path
        planned.append(FileRecord(path, dest, remote.size, remote.sha256, remote.blob_id))
    return planned


def check_space(folder: Path, needed: int, keep_free: int) -> None:
    """507 unless the disk holding `folder` has `needed` bytes free beyond `keep_free`."""
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if free - keep_free < needed:
        kept = f" (plus {human_size(keep_free)} kept free)" if keep_free else ""
        raise InsufficientStorage(
            f"the download needs {human_size(needed)} in {folder}{kept}; the disk has "
            f"{human_size(free)} free"
        )


def _plain_name(name: str) -> bool:
    return bool(name) and "/" not in name and "\\" not in name and not name.startswith(".")


def _safe_repo_path(name: str) -> bool:
    if not name or name.startswith("/") or "\\" in name or "\0" in name:
        return False
    return all(part not in ("", ".", "..") for part in name.split("/"))
