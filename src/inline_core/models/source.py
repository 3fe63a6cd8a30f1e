"""`Source`: where one component's files are, and an identity that changes when they do (torch-free).

A source is a single file, a view of one (an all-in-one checkpoint's tensors under one prefix, the
prefix cut: read as if it were a file of its own), a component folder, or a subfolder of a
diffusers pipeline folder. Every family names its components with sources; residency keys, node
cache keys and the worker group's rank specs are built from them.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import cast

# A folder's identity takes a walk of its files, so it is remembered this long (the catalog's own
# rescan interval): a file replaced is noticed within that time.
IDENTITY_TTL_S = 1.0
_identity_lock = threading.Lock()
_identities: dict[Path, tuple[float, str]] = {}


@dataclass(frozen=True)
class Source:
    """A component's files: a file, a view of a file, a folder, or a subfolder of a diffusers
    pipeline folder."""

    path: Path
    subfolder: str | None = None
    view: str | None = None  # a checkpoint's key prefix, e.g. "first_stage_model."

    @property
    def location(self) -> Path:
        return self.path / self.subfolder if self.subfolder else self.path

    @property
    def is_file(self) -> bool:
        return self.subfolder is None and self.path.is_file()

    def identity(self) -> str:
        """Changes when the files behind this source change (size and mtime); a view's names its
        prefix, so two parts of one checkpoint are two components."""
        file = self._file_identity()
        return f"{file}#{self.view}" if self.view else file

    def _file_identity(self) -> str:
        loc = self.location
        now = time.monotonic()
        with _identity_lock:
            known = _identities.get(loc)
        if known is not None and now - known[0] < IDENTITY_TTL_S:
            return known[1]
        value = _identity_of(loc)
        with _identity_lock:
            _identities[loc] = (now, value)
        return value

    def to_json(self) -> dict[str, str | None]:
        body = {"path": str(self.path), "subfolder": self.subfolder}
        return {**body, "view": self.view} if self.view else body

    @classmethod
    def from_json(cls, value: object) -> Source | None:
        """The source `to_json` wrote; None for anything else (an absent component)."""
        if not isinstance(value, dict) or "path" not in value:
            return None
        fields = cast(dict[str, object], value)
        subfolder, view = fields.get("subfolder"), fields.get("view")
        return cls(
            Path(str(fields["path"])),
            str(subfolder) if subfolder else None,
            str(view) if view else None,
        )


def _identity_of(loc: Path) -> str:
    try:
        if loc.is_file():
            st = loc.stat()
            return f"{loc}:{st.st_size}:{st.st_mtime_ns}"
        size, mtime = 0, 0
        for dirpath, _dirs, files in os.walk(loc):
            for name in files:
                st = os.stat(os.path.join(dirpath, name))
                size += st.st_size
                mtime = max(mtime, st.st_mtime_ns)
        return f"{loc}:{size}:{mtime}"
    except OSError:
        return f"{loc}:missing"
