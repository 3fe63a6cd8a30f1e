"""Put on PYTHONPATH, this makes the modules named in `INLINE_TEST_HIDE_MODULES` (comma-separated)
look not installed to the process: found by no finder, imported by nobody, as on an install
without their extra. Used by the start-up tests of settings whose extra is missing."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Sequence
from types import ModuleType

HIDDEN = frozenset(n for n in os.environ.get("INLINE_TEST_HIDE_MODULES", "").split(",") if n)


class _NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


if HIDDEN:
    sys.meta_path.insert(0, _NotInstalled())
