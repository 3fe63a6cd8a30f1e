"""When a model's forwards run on a fused copy (`fused.py`) and when per row: the device policy
decides (`device/adapters.py`), from how many forwards in a row one stack has held every row, the
copy's size and the memory budget's room; this keeps the count and the copy.

A model holds at most one copy, shared by every pipeline over it. It is made through the
residency (`CopyStore`), counted in its budget as an entry of its own; the residency may evict it
when memory is needed, and the next forward then finds it gone and runs per row. A forward whose
rows hold another stack, or several, runs per row on the shared weights; once the copy's stack
has been away from `DROP_AFTER_FORWARDS` forwards in a row the copy is dropped, and a new held
stack's copy replaces it. One thread (the step loop's) runs forwards, so this state needs no
lock."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Protocol
from weakref import WeakKeyDictionary

from torch import nn

from inline_core.device.adapters import DROP_AFTER_FORWARDS, AdapterMode, fuse_decision
from inline_core.diffusion.adapters.fused import FusedCopy, copy_bytes, fuse
from inline_core.diffusion.adapters.plan import RowStack
from inline_core.diffusion.adapters.stack import LoraStack
from inline_core.diffusion.adapters.weights import modules_of
from inline_core.engine.adapter_counts import AdapterTotals
from inline_core.engine.residency import Footprint


class CopyStore(Protocol):
    """Where fused copies live: the residency, in its budget."""

    totals: AdapterTotals

    def room(self) -> int | None:
        """Bytes left in the memory budget (None: no budget)."""
        ...

    def put(self, key: Hashable, value: object, footprint: Footprint) -> None:
        """Hold `value` under `key`, counted in the budget (evicting others but the model's own
        parts to make room)."""
        ...

    def holds(self, key: Hashable, value: object) -> bool:
        """Whether `value` is still resident under `key` (not evicted)."""
        ...

    def drop(self, key: Hashable) -> bool:
        """Let the copy under `key` go; whether it was resident."""
        ...


StackKey = tuple[tuple[str, float], ...]


def stack_key(stack: LoraStack) -> StackKey:
    """A stack as a fused copy is named: each file once, at its summed strength."""
    summed: dict[str, float] = {}
    for use in stack:
        summed[use.identity] = summed.get(use.identity, 0.0) + use.strength
    return tuple((identity, s) for identity, s in summed.items() if s != 0.0)


_ON_MODEL: WeakKeyDictionary[nn.Module, Fusing] = WeakKeyDictionary()


class Fusing:
    """One model's fused copy and the count that decides it; every pipeline over the same loaded
    model shares one (`Fusing.of`), so they share the copy too."""

    @classmethod
    def of(cls, model: nn.Module, mode: AdapterMode, store: CopyStore, scope: Hashable) -> Fusing:
        found = _ON_MODEL.get(model)
        if found is None:
            found = _ON_MODEL[model] = cls(modules_of(model), mode, store, scope)
        return found

    def __init__(
        self,
        modules: Mapping[str, nn.Module],
        mode: AdapterMode,
        store: CopyStore,
        scope: Hashable,
    ) -> None:
        self._modules = modules
        self._mode = mode
        self._store = store
        self._scope = scope  # the model the copies are of (its resident key)
        self._held: StackKey = ()  # the stack every row of the last forwards held
        self._held_forwards = 0  # how many forwards in a row it has
        self._copy: FusedCopy | None = None
        self._away = 0  # forwards in a row without the copy's stack
        store.totals.placed(mode)

    def choose(self, stacks: Sequence[LoraStack], rows: Callable[[], RowStack]) -> FusedCopy | None:
        """Count one forward whose rows hold `stacks`; the copy it runs on, or None to run per
        row (or plain, where no row holds a stack). `rows()` resolves the weights of the stack
        every row holds, when one does."""
        keys = {stack_key(stack) for stack in stacks}
        held = next(iter(keys)) if len(keys) == 1 else ()
        adapted = any(keys)
        if held and held == self._held:
            self._held_forwards += 1
        else:
            self._held, self._held_forwards = held, 1 if held else 0
        copy = self._current()
        if copy is not None and held and copy.key == self._key(held):
            self._away = 0
            self._store.totals.forward(fused=True)
            return copy
        if copy is not None:
            self._away += 1
            if self._away >= DROP_AFTER_FORWARDS:
                self._drop()
        made = self._fused(held, rows) if held else None
        if adapted:
            self._store.totals.forward(fused=made is not None)
        return made

    def _key(self, held: StackKey) -> Hashable:
        return ("lora-fused", self._scope, held)

    def _current(self) -> FusedCopy | None:
        """The copy, unless the residency evicted it for memory (then it is let go here too)."""
        copy = self._copy
        if copy is not None and not self._store.holds(copy.key, copy):
            self._copy = None
            return None
        return copy

    def _fused(self, held: StackKey, rows: Callable[[], RowStack]) -> FusedCopy | None:
        """A copy of the held stack, where the policy says it pays (else None)."""
        if not self._mode.may_fuse:  # never on this placement: nothing to weigh
            return None
        row = rows()
        need = copy_bytes(self._modules, row)
        if need == 0:
            return None
        room = self._store.room()
        freed = self._copy.nbytes if self._copy is not None else 0  # the copy it would replace
        room = None if room is None else room + freed
        decision = fuse_decision(self._mode, self._held_forwards, need, room)
        self._store.totals.decided(decision)
        if not decision.fuse:
            return None
        self._drop()  # at most one copy a model
        copy = fuse(self._key(held), self._modules, row)
        self._store.put(copy.key, copy, Footprint(copy.nbytes))
        self._store.totals.fused()
        self._copy, self._away = copy, 0
        return copy

    def _drop(self) -> None:
        copy, self._copy = self._copy, None
        if copy is not None and self._store.drop(copy.key):
            self._store.totals.dropped()
