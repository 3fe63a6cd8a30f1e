"""The requirements route's JSON: each piece a node needs, and the hub sources for it with their
sizes (asked of the hub once a minute per repo; an unreachable hub is reported, not raised)."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from inline_core.contract.requirements import Piece
from inline_core.downloads.manager import DownloadManager
from inline_core.downloads.targets import Target
from inline_core.errors import InlineError


def requirements_json(
    node_type: str, family: str, pieces: Sequence[Piece], downloads: DownloadManager, root: Path
) -> dict[str, Any]:
    sources: dict[str, dict[str, Any]] = {}
    listed: list[dict[str, Any]] = []
    for piece in pieces:
        mine = [_source(name, target, downloads, root, sources) for name, target in piece.sources]
        satisfied = piece.satisfied
        size = (
            satisfied.bytes
            if satisfied is not None
            else next((s["bytes"] for s in mine if s["bytes"] is not None), None)
        )
        listed.append(
            {
                "role": piece.role,
                "label": piece.label,
                "category": piece.category,
                "expected": list(piece.expected),
                "present": piece.present,
                "satisfiedBy": None
                if satisfied is None
                else {
                    "category": satisfied.category,
                    "name": satisfied.name,
                    "subfolder": satisfied.subfolder,
                    "path": str(satisfied.path),
                },
                "bytes": size,
                "hint": piece.hint,
                "sources": mine,
            }
        )
    return {
        "nodeType": node_type,
        "family": family,
        "ready": all(p.present for p in pieces),
        "requirements": listed,
    }


def _source(
    name: str,
    target: Target,
    downloads: DownloadManager,
    root: Path,
    seen: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    known = seen.get(name)
    if known is not None:
        return known
    body: dict[str, Any] = {
        "name": name,
        "layout": target.layout,
        "repo": target.repo_id,
        "revision": target.revision,
        "files": list(target.files),
        "category": target.category,
        "folder": target.folder,
        "provides": list(target.roles),
        "destination": target.destination(root).relative_to(root).as_posix(),
        "present": target.destination(root).exists(),
        "bytes": None,
        "hubError": None,
        "download": target.request(),
    }
    try:
        listing = downloads.listing(target.repo_id, target.revision)
        matched = {
            path
            for pattern in target.files
            for path in listing.files
            if path == pattern or fnmatch.fnmatchcase(path, pattern)
        }
        body["bytes"] = sum(listing.files[p].size for p in matched) if matched else None
    except InlineError as exc:
        body["hubError"] = {"code": exc.code, "message": exc.message}
    seen[name] = body
    return body
