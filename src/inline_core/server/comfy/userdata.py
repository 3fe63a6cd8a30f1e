"""The frontend's user files: `/users`, `/settings`, `/userdata` (saved workflows, templates,
subgraphs) and `/v2/userdata`, kept in the data folder (`comfy/user/`), one user as ComfyUI's
default is. Paths are relative to that folder and never leave it (400 for one that tries)."""

from __future__ import annotations

import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any, cast

from inline_core.errors import Conflict, NotFound
from inline_core.server.access import Forbidden
from inline_core.server.comfy.errors import BadPath

SETTINGS_FILE = "comfy.settings.json"
FOLDERS = ("workflows", "subgraphs")
# A new user opens straight onto the default graph, with the cheap live previews.
DEFAULT_SETTINGS: dict[str, Any] = {
    "Comfy.TutorialCompleted": True,
    "Comfy.Execution.PreviewMethod": "auto",
}


class UserFiles:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.Lock()
        for folder in FOLDERS:  # the frontend lists these at boot
            (root / folder).mkdir(parents=True, exist_ok=True)

    def path(self, relative: str) -> Path:
        """`relative` inside the user folder; 400 for `..`, an absolute path or a NUL."""
        if not relative or "\0" in relative or relative.startswith(("/", "\\")):
            raise BadPath("a user file path must be relative to the user folder")
        parts = relative.replace("\\", "/").split("/")
        if any(p in ("..", "") for p in parts):
            raise BadPath("a user file path may not hold '..' or empty parts")
        base = self.root.resolve()
        target = (base / relative).resolve()
        if target != base and base not in target.parents:
            raise Forbidden("that path leaves the user folder")
        return target

    # ---- settings ------------------------------------------------------------------------------

    def settings(self) -> dict[str, Any]:
        path = self.root / SETTINGS_FILE
        try:
            stored: object = json.loads(path.read_text())
        except (OSError, ValueError):
            stored = {}
        if not isinstance(stored, dict):
            return dict(DEFAULT_SETTINGS)
        return {**DEFAULT_SETTINGS, **cast(dict[str, Any], stored)}

    def merge_settings(self, values: dict[str, Any]) -> None:
        with self._lock:
            merged = {**self.settings(), **values}
            self._write(self.root / SETTINGS_FILE, json.dumps(merged, indent=2).encode())

    # ---- files ---------------------------------------------------------------------------------

    def listing(self, folder: str, *, recurse: bool, full: bool, split: bool) -> list[Any]:
        base = self.path(folder) if folder else self.root
        if not base.is_dir():
            raise NotFound(f"no user folder {folder!r}")
        found = base.rglob("*") if recurse else base.glob("*")
        files = sorted(p for p in found if p.is_file() and not p.name.startswith(".tmp-"))
        out: list[Any] = []
        for path in files:
            rel = path.relative_to(base).as_posix()
            if full:
                stat = path.stat()
                out.append(
                    {
                        "path": rel,
                        "size": stat.st_size,
                        "modified": int(stat.st_mtime * 1000),
                        "created": int(stat.st_ctime * 1000),
                    }
                )
            elif split:
                out.append([rel, *rel.split("/")])
            else:
                out.append(rel)
        return out

    def listing_v2(self, folder: str) -> list[dict[str, Any]]:
        base = self.path(folder) if folder else self.root
        if not base.is_dir():
            raise NotFound(f"no user folder {folder!r}")
        out: list[dict[str, Any]] = []
        for path in sorted(base.iterdir()):
            if path.name.startswith(".tmp-"):
                continue
            rel = path.relative_to(self.root).as_posix()
            if path.is_dir():
                out.append({"name": path.name, "path": rel, "type": "directory"})
            else:
                stat = path.stat()
                out.append(
                    {
                        "name": path.name,
                        "path": rel,
                        "type": "file",
                        "size": stat.st_size,
                        "modified": stat.st_mtime,
                    }
                )
        return out

    def read(self, relative: str) -> Path:
        path = self.path(relative)
        if not path.is_file():
            raise NotFound(f"no user file {relative!r}")
        return path

    def info(self, relative: str) -> dict[str, Any]:
        stat = self.path(relative).stat()
        return {
            "path": relative,
            "size": stat.st_size,
            "modified": int(stat.st_mtime * 1000),
            "created": int(stat.st_ctime * 1000),
        }

    def write(self, relative: str, data: bytes, *, overwrite: bool) -> None:
        path = self.path(relative)
        with self._lock:
            if path.exists() and not overwrite:
                raise Conflict(f"the user file {relative!r} exists")
            self._write(path, data)

    def delete(self, relative: str) -> None:
        path = self.path(relative)
        if not path.is_file():
            raise NotFound(f"no user file {relative!r}")
        path.unlink()

    def move(self, source: str, dest: str, *, overwrite: bool) -> None:
        src, dst = self.path(source), self.path(dest)
        with self._lock:
            if not src.is_file():
                raise NotFound(f"no user file {source!r}")
            if dst.exists() and not overwrite:
                raise Conflict(f"the user file {dest!r} exists")
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.replace(src, dst)

    @staticmethod
    def _write(path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
