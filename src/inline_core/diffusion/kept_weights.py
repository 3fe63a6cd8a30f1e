"""The storage choice for each part a stack loads: its placement, with its weights kept in their
file's dtype where a converted copy would not fit the memory budget (`device/storage.py`).

The choice depends only on the part's files, its placement and the budget, so a part is loaded
the same way every time (its resident key holds the placement) and the warning is given once."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import replace

from inline_core.device.policy import Placement
from inline_core.device.storage import kept_dtype, kept_reason
from inline_core.diffusion.files.weights import StoredWeights, stored_weights
from inline_core.models.source import Source

log = logging.getLogger(__name__)


class KeptWeights:
    def __init__(self, budget: Callable[[], int | None]) -> None:
        self._budget = budget
        self._lock = threading.Lock()
        self._stored: dict[str, StoredWeights | None] = {}
        self._warned: set[tuple[str, Placement]] = set()
        self._kept: dict[str, dict[str, str]] = {}  # part name -> what health shows of it

    def placement(self, name: str, source: Source, placement: Placement) -> Placement:
        """`placement`, or a copy keeping the weights in their file's dtype."""
        budget = self._budget()
        if budget is None or placement.dtype != "float32" or placement.device != "cpu":
            return placement  # the rule never applies: no header to read
        identity = source.identity()
        with self._lock:
            known = identity in self._stored
            stored = self._stored.get(identity)
        if not known:
            stored = stored_weights(source)
            with self._lock:
                self._stored[identity] = stored
        if stored is None:
            return placement
        kept = kept_dtype(placement, stored.dtype, stored.numbers, budget)
        if kept is None:
            return placement
        with self._lock:
            first = (identity, placement) not in self._warned
            self._warned.add((identity, placement))
            self._kept[name] = {
                "file": str(source.location),
                "kept": kept,
                "computes": placement.dtype,
            }
        if first:
            log.warning(kept_reason(name, placement, kept, stored.numbers, budget))
        return replace(placement, storage=kept)

    def kept(self) -> list[dict[str, str]]:
        """The parts whose weights were kept in their file's dtype (health's `keptWeights`)."""
        with self._lock:
            return [{"part": name, **about} for name, about in sorted(self._kept.items())]
