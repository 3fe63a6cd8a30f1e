"""A download as clients see it (the routes' and the events' JSON, and what the command's
progress bar reads)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from inline_core.downloads.live import LiveProgress
from inline_core.downloads.records import DownloadRecord


def download_json(record: DownloadRecord, live: LiveProgress, models: Path) -> dict[str, Any]:
    total = record.bytes_total
    running = record.status == "running"
    eta = live.eta_s(total) if running else None
    return {
        "downloadId": record.id,
        "status": record.status,
        "repo": record.repo,
        "revision": record.revision,
        "commit": record.commit,
        "category": record.category,
        "folder": record.folder,
        "destinations": [_relative(p, models) for p in record.destinations(models)],
        "files": [
            {
                "path": f.path,
                "dest": f.dest,
                "bytesDone": held,
                "bytesTotal": f.size,
                "verified": f.done,
                "sha256": f.sha256,
            }
            for f, held in zip(record.files, live.held, strict=True)
        ],
        "bytesDone": live.done,
        "bytesTotal": total,
        "rate": round(live.rate(), 1) if running else 0.0,
        "etaS": None if eta is None else round(eta, 1),
        "createdAt": record.created_at,
        "startedAt": record.started_at,
        "finishedAt": record.finished_at,
        "error": record.error,
    }


def progress_json(record: DownloadRecord, live: LiveProgress, index: int) -> dict[str, Any]:
    file = record.files[index]
    eta = live.eta_s(record.bytes_total)
    return {
        "type": "progress",
        "downloadId": record.id,
        "file": file.path,
        "fileBytesDone": live.held[index],
        "fileBytesTotal": file.size,
        "bytesDone": live.done,
        "bytesTotal": record.bytes_total,
        "rate": round(live.rate(), 1),
        "etaS": None if eta is None else round(eta, 1),
    }


def _relative(path: Path, models: Path) -> str:
    try:
        return path.relative_to(models).as_posix()
    except ValueError:
        return str(path)
