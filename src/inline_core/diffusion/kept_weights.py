"""The storage choice for each part a stack loads: its placement, with its weights kept in their
file's dtype where that file stores fp8 or a converted copy would not fit the memory budget
(`device/storage.py`).

The choice depends only on the part's files, its placement and the budget, so a part is loaded
the same way every time (its resident key holds the placement) and the message is given once."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import replace

from inline_core.device.policy import Placement
from inline_core.device.storage import STORAGE_ONLY, kept_dtype, kept_reason, stored_reason
from inline_core.diffusion.files.weights import StoredWeights, stored_weights
from inline_core.models.source import Source

log = logging.getLogger(__name__)


class KeptWeights:
    def __init__(self, budget: Callable[[], int | None]) -> None:
        self._budget = budget
        self._lock = threading.Lock()
        self._stored: dict[str, StoredWeights | None] = {}
        self._told: set[tuple[str, Placement]] = set()
        self._kept: dict[str, dict[str, str]] = {}  # part name -> what health shows of it

    def placement(self, name: str, source: Source, placement: Placement) -> Placement:
        """`placement`, or a copy keeping the weights in their file's dtype."""
        stored = self._stored_weights(source)
        if stored is None:
            return placement
        budget = self._budget()
        kept = kept_dtype(placement, stored.dtype, stored.numbers, budget)
        if kept is None:
            return placement
        identity = source.identity()
        with self._lock:
            first = (identity, placement) not in self._told
            self._told.add((identity, placement))
            self._kept[name] = {
                "file": str(source.location),
                "kept": kept,
                "computes": placement.dtype,
            }
        only_stored = kept in STORAGE_ONLY
        if first and only_stored:
            log.info(stored_reason(name, placement, kept))
        elif first and budget is not None:
            log.warning(kept_reason(name, placement, kept, stored.numbers, budget))
        return replace(placement, storage=kept)

    def _stored_weights(self, source: Source) -> StoredWeights | None:
        """What the part's files store, read from their headers once per file identity."""
        identity = source.identity()
        with self._lock:
            if identity in self._stored:
                return self._stored[identity]
        stored = stored_weights(source)
        with self._lock:
            self._stored[identity] = stored
        return stored

    def kept(self) -> list[dict[str, str]]:
        """The parts whose weights were kept in their file's dtype (health's `keptWeights`)."""
        with self._lock:
            return [{"part": name, **about} for name, about in sorted(self._kept.items())]
