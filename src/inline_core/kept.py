"""`Kept`: values worked out once per key and read back after, the least recently used dropped
past a bound; safe to share between threads. For pure work a hot path repeats (a schedule's
sigmas at settings seen before), not for anything whose inputs can change under the same key."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Kept(Generic[K, V]):
    def __init__(self, bound: int) -> None:
        if bound < 1:
            raise ValueError(f"a Kept store holds at least 1 value, not {bound}")
        self.bound = bound
        self.made = 0  # values worked out (misses), for tests and stats
        self._lock = threading.Lock()
        self._values: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K, make: Callable[[], V]) -> V:
        """The value kept for `key`, or `make()`'s, kept. `make` runs outside the lock: two
        threads missing the same key at once may both work it out (the values are equal)."""
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key]
        value = make()
        with self._lock:
            self.made += 1
            self._values[key] = value
            while len(self._values) > self.bound:
                self._values.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._values.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._values)
