"""The packs folder: which pack versions are installed, and where each one lives.

    <packs>/index.json                  {"packs": {name: {version, dir, installedAt, source}}}
    <packs>/.lock                       held while a command changes the folder
    <packs>/<name>/<version>-<token>/   pyproject.toml (the manifest), described.json, env/
    <packs>/<name>/<version>-<token>/.in-use   share-locked by every server running it

The index is replaced atomically, so a reader sees the old state or the new one, never a
half-installed pack. A version folder is deleted only when no server holds its `.in-use` lock;
one still in use is left for that server to delete once its worker stops.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from inline_core.config import absolute
from inline_core.packs.errors import PackNotInstalled

INDEX = "index.json"
MANIFEST = "pyproject.toml"
DESCRIBED = "described.json"
ENV = "env"
IN_USE = ".in-use"
STAGING_PREFIX = ".staging-"


@dataclass(frozen=True)
class InstalledPack:
    name: str
    version: str
    folder: Path
    installed_at: float
    source: str

    @property
    def manifest_path(self) -> Path:
        return self.folder / MANIFEST

    @property
    def env_dir(self) -> Path:
        return self.folder / ENV

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "dir": self.folder.relative_to(self.folder.parents[1]).as_posix(),
            "installedAt": self.installed_at,
            "source": self.source,
        }


def try_lock_unused(folder: Path) -> int | None:
    """An exclusive lock on a version folder no server is running, or None while one is."""
    try:
        fd = os.open(folder / IN_USE, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def hold_in_use(folder: Path) -> int:
    """A shared lock that keeps `folder` from being deleted while a worker runs from it."""
    fd = os.open(folder / IN_USE, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_SH)
    return fd


class PackStore:
    def __init__(self, root: Path) -> None:
        # Absolute: a pack's interpreter is started from another working directory.
        self.root = absolute(root)

    @property
    def index_path(self) -> Path:
        return self.root / INDEX

    def stamp(self) -> tuple[int, int] | None:
        """Changes whenever the index is replaced (cheap: one stat)."""
        try:
            st = self.index_path.stat()
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_mtime_ns)

    def installed(self) -> dict[str, InstalledPack]:
        try:
            raw = json.loads(self.index_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        packs = cast(dict[str, dict[str, Any]], raw.get("packs", {}))
        return {
            name: InstalledPack(
                name=name,
                version=str(entry["version"]),
                folder=self.root / str(entry["dir"]),
                installed_at=float(entry.get("installedAt", 0.0)),
                source=str(entry.get("source", "")),
            )
            for name, entry in packs.items()
        }

    def get(self, name: str) -> InstalledPack:
        pack = self.installed().get(name)
        if pack is None:
            raise PackNotInstalled(f"no pack {name!r} is installed")
        return pack

    @contextmanager
    def changing(self) -> Generator[None]:
        """One command at a time changes the folder (an install, a remove)."""
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def staging(self, name: str) -> Path:
        folder = self.root / name
        folder.mkdir(parents=True, exist_ok=True)
        stage = folder / f"{STAGING_PREFIX}{os.getpid()}-{time.time_ns()}"
        stage.mkdir()
        return stage

    def _write(self, packs: dict[str, InstalledPack]) -> None:
        body = {"packs": {name: pack.to_json() for name, pack in sorted(packs.items())}}
        partial = self.root / f".{INDEX}.{os.getpid()}.part"
        partial.write_text(json.dumps(body, indent=2), encoding="utf-8")
        os.replace(partial, self.index_path)

    def commit(self, pack: InstalledPack) -> InstalledPack | None:
        """Make `pack` the installed version of its name; returns the one it replaced."""
        packs = self.installed()
        previous = packs.get(pack.name)
        packs[pack.name] = pack
        self._write(packs)
        return previous

    def remove(self, name: str) -> InstalledPack:
        packs = self.installed()
        pack = packs.pop(name, None)
        if pack is None:
            raise PackNotInstalled(f"no pack {name!r} is installed")
        self._write(packs)
        return pack

    def sweep(self) -> list[Path]:
        """Delete version folders (and stale staging ones) that nothing installed or running
        uses; returns what was deleted."""
        if not self.root.is_dir():
            return []
        current = {pack.folder for pack in self.installed().values()}
        deleted: list[Path] = []
        for pack_dir in (p for p in self.root.iterdir() if p.is_dir() and p.name[0] != "."):
            for folder in (p for p in pack_dir.iterdir() if p.is_dir() and p not in current):
                fd = try_lock_unused(folder)
                if fd is None:
                    continue
                try:
                    shutil.rmtree(folder, ignore_errors=True)
                    deleted.append(folder)
                finally:
                    os.close(fd)
            if not any(pack_dir.iterdir()):
                pack_dir.rmdir()
        return deleted
