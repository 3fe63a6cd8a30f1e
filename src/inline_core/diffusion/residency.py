"""Loaded components stay resident between runs, evicted least recently used over a memory budget.

One cache per server, shared by every family, under the one budget the device policy gives: two
families loaded under a budget that fits one evict each other. Keys name a component precisely
(family, part, the files' identity, device, dtype, quantization), so t2i and img2img share one
loaded transformer and a replaced file loads fresh. Loading one key happens once even when several
runs ask for it at the same moment.

What a component costs is its `Footprint`: memory of its own (a copy on the heap or on a device),
counted against the budget, and pages mapped from its files (weights kept in their file's dtype
on the CPU), which the OS can drop and read back without us: counted apart, never evicted for.

It never thrashes: a load names the components the same render already holds (`keep`), and those
are not evicted for it. When one render needs more than the budget, its components stay resident
together over the budget, with a warning saying so once, rather than reloading from disk on every
render. Counters (loads, reloads of a key evicted earlier, hits, evictions) let tests and benches
check that a steady workload loads nothing.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Hashable
from dataclasses import dataclass
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")
GIB = 1024**3


@dataclass(frozen=True)
class Footprint:
    own_bytes: int  # heap or device memory of its own: counted against the budget
    mapped_bytes: int = 0  # pages of its files mapped read-only: reclaimable, counted apart


@dataclass
class _Entry:
    value: Any
    footprint: Footprint


@dataclass(frozen=True)
class ResidencyStats:
    loads: int
    reloads: int
    hits: int
    evictions: int
    resident: int
    resident_bytes: int
    mapped_bytes: int
    budget_bytes: int | None
    over_budget: bool
    mapped_over_budget: bool  # own + mapped bytes exceed the budget: the OS pages weights in

    def to_json(self) -> dict[str, int | bool | None]:
        return {
            "loads": self.loads,
            "reloads": self.reloads,
            "hits": self.hits,
            "evictions": self.evictions,
            "resident": self.resident,
            "residentBytes": self.resident_bytes,
            "mappedBytes": self.mapped_bytes,
            "budgetBytes": self.budget_bytes,
            "overBudget": self.over_budget,
            "mappedOverBudget": self.mapped_over_budget,
        }


class ResidentCache:
    def __init__(self, budget_bytes: int | None = None) -> None:
        self.budget_bytes = budget_bytes  # None: no limit
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self._loading: dict[Hashable, threading.Lock] = {}
        self._ever_loaded: set[Hashable] = set()
        self._warned_over_budget = False
        self._warned_mapped_over_budget = False
        self.loads = 0
        self.reloads = 0
        self.hits = 0
        self.evictions = 0

    def get(
        self,
        key: Hashable,
        load: Callable[[], tuple[T, Footprint]],
        keep: Collection[Hashable] = (),
    ) -> T:
        """The resident value for `key`, loading it with `load() -> (value, footprint)` if absent.
        `keep`: keys the same render holds, never evicted to make room for this one."""
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
            value, footprint = load()
            with self._lock:
                self.loads += 1
                if key in self._ever_loaded:
                    self.reloads += 1
                self._ever_loaded.add(key)
                self._make_room(footprint.own_bytes, keep)
                self._entries[key] = _Entry(value, footprint)
                self._loading.pop(key, None)
                self._warn_if_over_budget()
            return value

    def put(
        self, key: Hashable, value: object, footprint: Footprint, keep: Collection[Hashable] = ()
    ) -> None:
        """Hold `value` (made here, not loaded from files: not counted as a load) under `key`,
        in the budget like any entry, evicting others but `keep` to make room."""
        with self._lock:
            self._entries.pop(key, None)
            self._make_room(footprint.own_bytes, keep)
            self._entries[key] = _Entry(value, footprint)
            self._warn_if_over_budget()

    def put_if_room(self, key: Hashable, value: object, footprint: Footprint) -> bool:
        """Hold `value` under `key` only where it fits the budget's room as it is now (what
        `key` held before counted as freed), evicting nothing; whether it was put. For a made
        entry that is only a speed-up (a fused LoRA copy): checked and put under one hold of
        the lock, so room taken since a caller looked at `room()` is never spent twice, and no
        part of a render is evicted for it."""
        with self._lock:
            if self.budget_bytes is not None:
                replaced = self._entries.get(key)
                used = self._own_bytes() - (0 if replaced is None else replaced.footprint.own_bytes)
                if used + footprint.own_bytes > self.budget_bytes:
                    return False
            self._entries.pop(key, None)
            self._entries[key] = _Entry(value, footprint)
            return True

    def peek(self, key: Hashable) -> Any | None:
        with self._lock:
            entry = self._entries.get(key)
            return None if entry is None else entry.value

    def room(self) -> int | None:
        """Bytes of the budget no resident entry takes (None: no budget)."""
        with self._lock:
            if self.budget_bytes is None:
                return None
            return max(0, self.budget_bytes - self._own_bytes())

    def evict(self, key: Hashable) -> bool:
        with self._lock:
            return self._entries.pop(key, None) is not None

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def stats(self) -> ResidencyStats:
        with self._lock:
            own, mapped = self._own_bytes(), self._mapped_bytes()
            return ResidencyStats(
                loads=self.loads,
                reloads=self.reloads,
                hits=self.hits,
                evictions=self.evictions,
                resident=len(self._entries),
                resident_bytes=own,
                mapped_bytes=mapped,
                budget_bytes=self.budget_bytes,
                over_budget=self.budget_bytes is not None and own > self.budget_bytes,
                mapped_over_budget=self.budget_bytes is not None
                and mapped > 0
                and own + mapped > self.budget_bytes,
            )

    def _own_bytes(self) -> int:
        return sum(e.footprint.own_bytes for e in self._entries.values())

    def _mapped_bytes(self) -> int:
        return sum(e.footprint.mapped_bytes for e in self._entries.values())

    def _touch(self, key: Hashable) -> _Entry | None:
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
        return entry

    def _make_room(self, incoming: int, keep: Collection[Hashable]) -> None:
        """Evict least recently used entries, except those in `keep`, until `incoming` more bytes
        fit the budget. What cannot be made to fit still loads: refusing would make the model
        unusable, and reloading it on every render is worse (see `_warn_if_over_budget`)."""
        if self.budget_bytes is None:
            return
        used = self._own_bytes()
        for key in list(self._entries):
            if used + incoming <= self.budget_bytes:
                return
            if key in keep:
                continue
            used -= self._entries.pop(key).footprint.own_bytes
            self.evictions += 1

    def _warn_if_over_budget(self) -> None:
        budget = self.budget_bytes
        if budget is None:
            return
        own, mapped = self._own_bytes(), self._mapped_bytes()
        if 0 < mapped and budget < own + mapped and not self._warned_mapped_over_budget:
            self._warned_mapped_over_budget = True
            log.warning(
                "the resident models map %.1f GiB of weight files and hold %.1f GiB of their own, "
                "more than the %.1f GiB memory budget: the OS reads mapped weights back from disk "
                "as renders touch them, so renders that change what they use (a new prompt) are "
                "slower; nothing is reloaded or copied",
                mapped / GIB,
                own / GIB,
                budget / GIB,
            )
        if own <= budget or self._warned_over_budget:
            return
        self._warned_over_budget = True
        log.warning(
            "the models one render needs take %.1f GiB of their own, over the %.1f GiB memory "
            "budget: they stay resident together rather than being reloaded on every render. "
            "Weights computed in their file's dtype on the CPU are mapped from the file and cost "
            "no budget (INLINE_DTYPE); on a GPU, --lowvram or --allow-cpu-offload saves VRAM",
            own / GIB,
            budget / GIB,
        )
