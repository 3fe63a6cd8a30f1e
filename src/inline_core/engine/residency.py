"""Loaded components stay resident between runs, evicted least recently used over a memory budget.

One cache per server, shared by every family, under the one budget the device policy gives: two
families loaded under a budget that fits one evict each other. Keys name a component precisely
(family, part, the files' identity, device, dtype, quantization), so t2i and img2img share one
loaded transformer and a replaced file loads fresh. Loading one key happens once even when several
runs ask for it at the same moment. Counters let tests and benchmarks check that a second render
loaded nothing.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass
class _Entry:
    value: Any
    nbytes: int


@dataclass(frozen=True)
class ResidencyStats:
    loads: int
    hits: int
    evictions: int
    resident: int
    resident_bytes: int
    budget_bytes: int | None

    def to_json(self) -> dict[str, int | None]:
        return {
            "loads": self.loads,
            "hits": self.hits,
            "evictions": self.evictions,
            "resident": self.resident,
            "residentBytes": self.resident_bytes,
            "budgetBytes": self.budget_bytes,
        }


class ResidentCache:
    def __init__(self, budget_bytes: int | None = None) -> None:
        self.budget_bytes = budget_bytes  # None: no limit
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self._loading: dict[Hashable, threading.Lock] = {}
        self.loads = 0
        self.hits = 0
        self.evictions = 0

    def get(self, key: Hashable, load: Callable[[], tuple[T, int]]) -> T:
        """The resident value for `key`, loading it with `load() -> (value, bytes)` if absent."""
        with self._lock:
            hit = self._touch(key)
            if hit is not None:
                self.hits += 1
                return hit.value
            gate = self._loading.setdefault(key, threading.Lock())
        with gate:  # one loader per key; the others wait and then find it resident
            with self._lock:
                hit = self._touch(key)
                if hit is not None:
                    self.hits += 1
                    return hit.value
            value, nbytes = load()
            with self._lock:
                self.loads += 1
                self._make_room(nbytes)
                self._entries[key] = _Entry(value, nbytes)
                self._loading.pop(key, None)
            return value

    def peek(self, key: Hashable) -> Any | None:
        with self._lock:
            entry = self._entries.get(key)
            return None if entry is None else entry.value

    def evict(self, key: Hashable) -> bool:
        with self._lock:
            return self._entries.pop(key, None) is not None

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def stats(self) -> ResidencyStats:
        with self._lock:
            return ResidencyStats(
                loads=self.loads,
                hits=self.hits,
                evictions=self.evictions,
                resident=len(self._entries),
                resident_bytes=sum(e.nbytes for e in self._entries.values()),
                budget_bytes=self.budget_bytes,
            )

    def _touch(self, key: Hashable) -> _Entry | None:
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
        return entry

    def _make_room(self, incoming: int) -> None:
        """Evict least recently used entries until `incoming` more bytes fit the budget.

        A component larger than the whole budget still loads (alone): refusing it would make the
        model unusable, and the device reports its own out-of-memory if it truly does not fit.
        """
        if self.budget_bytes is None:
            return
        used = sum(e.nbytes for e in self._entries.values())
        while self._entries and used + incoming > self.budget_bytes:
            _key, entry = self._entries.popitem(last=False)
            used -= entry.nbytes
            self.evictions += 1
