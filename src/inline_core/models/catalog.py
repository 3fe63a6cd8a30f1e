"""The model catalog: a scan of the ComfyUI-style category folders under the models root.

Each category lists weight files (recursively, by relative path) and model folders (a diffusers
snapshot with `model_index.json`, or an HF folder with `config.json`). The scan is repeated when it
is older than `ttl_s`, so a file dropped in, removed or replaced shows up without a restart, and the
fingerprint (folded into the registry version) changes with it. An all-in-one checkpoint in
`checkpoints/` is listed with what it contains (its diffusion model, VAE, text encoders), read
from its header by the `contents` the server hands in (the layout is the diffusers layer's,
`diffusion/files/checkpoint.py`, above this package).
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from inline_core.errors import NotFound

CATEGORIES = (
    "diffusion_models",
    "vae",
    "text_encoders",
    "loras",
    "controlnet",
    "checkpoints",
    "clip_vision",
    "upscale_models",
    "embeddings",
    "latent_upscale_models",  # LTX-2's spatial latent upsamplers (ComfyUI's folder)
)
WEIGHT_SUFFIXES = frozenset({".safetensors", ".sft", ".ckpt", ".pt", ".pth", ".bin", ".gguf"})
FOLDER_MARKERS = ("model_index.json", "config.json")
MAX_DEPTH = 16  # folder levels below a category that are scanned
# A checkpoint's parts, from its header (e.g. [{"part": "vae", "name": "vae", "prefix": ...}]);
# None when it cannot be read.
Contents = Callable[[Path], list[dict[str, str]] | None]


@dataclass(frozen=True)
class CatalogEntry:
    category: str
    name: str  # relative to the category folder, with forward slashes
    path: Path
    is_folder: bool
    size: int
    mtime_ns: int

    @property
    def identity(self) -> str:
        return f"{self.category}/{self.name}:{self.size}:{self.mtime_ns}"


def _inside(path: Path, root: Path) -> bool:
    """Whether `path`, every link followed, lies under `root` (False for a broken link or loop)."""
    try:
        path.resolve(strict=True).relative_to(root.resolve())
    except (ValueError, OSError, RuntimeError):  # RuntimeError: a symlink loop (Python < 3.13)
        return False
    return True


def _folder_stats(folder: Path, root: Path) -> tuple[int, int] | None:
    """(bytes, newest mtime) of a model folder; None if any link inside it leads out of `root`
    (a loader would follow it) or is broken."""
    size, mtime = 0, 0
    for dirpath, dirs, files in os.walk(folder):
        for name in (*dirs, *files):
            entry = Path(dirpath) / name
            if entry.is_symlink() and not _inside(entry, root):
                return None
        for f in files:
            try:
                st = os.stat(os.path.join(dirpath, f))
            except OSError:
                continue
            size += st.st_size
            mtime = max(mtime, st.st_mtime_ns)
    return size, mtime


def _fingerprint(entries: dict[str, list[CatalogEntry]]) -> str:
    h = hashlib.sha256()
    for category, listed in sorted(entries.items()):
        for e in listed:
            h.update(f"{category}\0{e.identity}\0".encode())
    return h.hexdigest()[:16]


def _scan_category(root: Path, category: str) -> list[CatalogEntry]:
    base = root / category
    if not base.is_dir():
        return []
    entries: list[CatalogEntry] = []

    visited: set[Path] = set()  # real folders already walked: a linked folder is walked once

    def walk(folder: Path, prefix: str) -> None:
        try:
            real = folder.resolve(strict=True)
            if real in visited or prefix.count("/") >= MAX_DEPTH:
                return
            visited.add(real)
            children = sorted(folder.iterdir())
        except (OSError, RuntimeError):
            return
        for child in children:
            if child.name.startswith("."):
                continue
            if not _inside(child, root):  # a symlink out of the models root, broken or looping
                continue
            name = f"{prefix}{child.name}"
            try:
                if child.is_dir():
                    if any((child / m).is_file() for m in FOLDER_MARKERS):
                        stats = _folder_stats(child, root)
                        if stats is not None:
                            size, mtime = stats
                            entries.append(CatalogEntry(category, name, child, True, size, mtime))
                    else:
                        walk(child, name + "/")
                elif child.suffix.lower() in WEIGHT_SUFFIXES:
                    st = child.stat()
                    entries.append(
                        CatalogEntry(category, name, child, False, st.st_size, st.st_mtime_ns)
                    )
            except OSError:  # removed while we looked, or unreadable: not listed this time
                continue

    walk(base, "")
    return entries


class Catalog:
    def __init__(self, root: Path, ttl_s: float = 1.0, contents: Contents | None = None) -> None:
        self.root = root
        self.ttl_s = ttl_s
        self.contents = contents
        self._lock = threading.Lock()
        self._entries: dict[str, list[CatalogEntry]] = {}
        self._fingerprint = ""
        self._scanned_at = -1.0

    def _fresh(self) -> dict[str, list[CatalogEntry]]:
        with self._lock:
            now = time.monotonic()
            if now - self._scanned_at > self.ttl_s:
                self._entries = {c: _scan_category(self.root, c) for c in CATEGORIES}
                self._fingerprint = _fingerprint(self._entries)
                self._scanned_at = now
            return self._entries

    def rescan(self) -> None:
        with self._lock:
            self._scanned_at = -1.0

    def entries(self, category: str) -> list[CatalogEntry]:
        return list(self._fresh().get(category, []))

    def entry(self, category: str, name: str) -> CatalogEntry:
        for e in self._fresh().get(category, []):
            if e.name == name:
                return e
        raise NotFound(f"no model {name!r} in {category}/ (models root {self.root})")

    # CatalogView
    def options(self, category: str) -> list[str]:
        return [e.name for e in self.entries(category)]

    def identity(self, category: str, name: str) -> str:
        return self.entry(category, name).identity

    def path(self, category: str, name: str) -> Path:
        return self.entry(category, name).path

    def fingerprint(self) -> str:
        """Changes when any entry does (its name, size or mtime): hashed once per scan."""
        self._fresh()
        with self._lock:
            return self._fingerprint

    def to_json(self) -> dict[str, list[dict[str, object]]]:
        return {c: [self._entry_json(e) for e in es] for c, es in sorted(self._fresh().items())}

    def _entry_json(self, entry: CatalogEntry) -> dict[str, object]:
        body: dict[str, object] = {
            "name": entry.name,
            "folder": entry.is_folder,
            "bytes": entry.size,
        }
        if entry.category == "checkpoints" and not entry.is_folder and self.contents is not None:
            body["contains"] = self.contents(entry.path)  # None: its header is unreadable
        return body
