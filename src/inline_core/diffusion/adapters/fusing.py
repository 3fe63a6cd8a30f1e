"""When a model's forwards run on a fused copy (`fused.py`) and when per row: the device policy
decides (`device/adapters.py`), from how many forwards in a row one stack has held every row, the
copy's size and the memory budget's room; this keeps the count and the copy's name.

A model holds at most one copy, shared by every pipeline over it. It lives in the residency
(`CopyStore`), counted in its budget as an entry of its own, and nowhere else: each forward fetches
it from there, so a copy the residency evicts when memory is needed is freed at once, and the next
forward finds it gone and runs per row. It is put only where the budget still has room for it
when it is made, never evicting anything: it is a speed-up, and no part of any render may go for
it. A fuse that fails (out of memory on the device, say) is logged once, recorded as the last
decision, and the forward runs per row; the same stack is not fused again until another stack,
or none, has held a forward. A forward whose rows hold another stack, or several, runs per row on
the shared weights; once the copy's stack has been away from `DROP_AFTER_FORWARDS` forwards in a
row the copy is dropped, and a new held stack's copy replaces it. One thread (the step loop's)
runs forwards, so this state needs no lock.

Nothing a model's `Fusing` holds reaches the model itself (its submodules only): the registry
keeps it as long as the model lives, and an evicted model must be freed."""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Protocol
from weakref import WeakKeyDictionary

from torch import nn

from inline_core.device.adapters import (
    DROP_AFTER_FORWARDS,
    AdapterMode,
    FuseDecision,
    fuse_decision,
)
from inline_core.diffusion.adapter_counts import AdapterTotals
from inline_core.diffusion.adapters.fused import FusedCopy, copy_bytes, fusable, fuse
from inline_core.diffusion.adapters.plan import RowStack
from inline_core.diffusion.adapters.stack import LoraStack
from inline_core.diffusion.adapters.weights import modules_of
from inline_core.diffusion.residency import Footprint
from inline_core.sizes import human_size

log = logging.getLogger(__name__)


class CopyStore(Protocol):
    """Where fused copies live: the residency, in its budget."""

    totals: AdapterTotals

    def room(self) -> int | None:
        """Bytes left in the memory budget (None: no budget)."""
        ...

    def put_if_room(self, key: Hashable, value: object, footprint: Footprint) -> bool:
        """Hold `value` under `key`, counted in the budget, only where the budget has room for
        it now (evicting nothing); whether it was put."""
        ...

    def peek(self, key: Hashable) -> object | None:
        """What is resident under `key` (None: nothing, or it was evicted)."""
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
        self._modules = modules  # the model's submodules: never the model itself
        self._mode = mode
        self._store = store
        self._scope = scope  # the model the copies are of (its resident key)
        self._held: StackKey = ()  # the stack every row of the last forwards held
        self._held_forwards = 0  # how many forwards in a row it has
        self._failed: StackKey = ()  # a held stack whose fuse failed: not tried again
        self._copy_key: Hashable | None = None  # the copy's name in the store, never the copy
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
            self._failed = ()
        copy = self._current()
        if copy is not None and held and copy.key == self._key(held):
            self._away = 0
            self._store.totals.forward(fused=True)
            return copy
        if copy is not None:
            self._away += 1
            if self._away >= DROP_AFTER_FORWARDS:
                self._drop()
        del copy  # held by the store alone: an eviction frees it
        made = self._fused(held, rows) if held and held != self._failed else None
        if adapted:
            self._store.totals.forward(fused=made is not None)
        return made

    def _key(self, held: StackKey) -> Hashable:
        return ("lora-fused", self._scope, held)

    def _current(self) -> FusedCopy | None:
        """The copy, fetched from the store (None: none made, or the residency evicted it)."""
        key = self._copy_key
        if key is None:
            return None
        copy = self._store.peek(key)
        if not isinstance(copy, FusedCopy):
            self._copy_key = None
            return None
        return copy

    def _fused(self, held: StackKey, rows: Callable[[], RowStack]) -> FusedCopy | None:
        """A copy of the held stack, where the policy says it pays and it can be made and kept
        (else None: the forward runs per row)."""
        if not self._mode.may_fuse:  # never on this placement: nothing to weigh
            return None
        row = rows()
        if not fusable(self._modules, row):
            self._store.totals.decided(FuseDecision(False, "fp8 weights: per-row deltas"))
            return None
        need = copy_bytes(self._modules, row)
        if need == 0:
            return None
        room = self._store.room()
        current = self._current()
        freed = 0 if current is None else current.nbytes  # the copy it would replace
        del current
        room = None if room is None else room + freed
        decision = fuse_decision(self._mode, self._held_forwards, need, room)
        self._store.totals.decided(decision)
        if not decision.fuse:
            return None
        self._drop()  # at most one copy a model, and its memory free before the new one's
        key = self._key(held)
        try:
            copy = fuse(key, self._modules, row)
            kept = self._store.put_if_room(key, copy, Footprint(copy.nbytes))
        except Exception as exc:  # torch.OutOfMemoryError among them: this forward, per row
            self._failed = held
            why = f"fuse failed: {type(exc).__name__}: {exc}"
            self._store.totals.decided(FuseDecision(False, f"{why}; per-row deltas"))
            log.warning(
                "a fused LoRA copy (%s) could not be made, %s; the forwards of this stack "
                "run per row on the shared weights",
                human_size(need),
                why,
            )
            return None
        if not kept:
            left = self._store.room()
            self._store.totals.decided(
                FuseDecision(
                    False,
                    f"the memory budget's room went to other entries while the copy was made "
                    f"({human_size(need)} needed, {human_size(left or 0)} left): per-row deltas",
                )
            )
            return None
        self._store.totals.fused()
        self._copy_key, self._away = key, 0
        return copy

    def _drop(self) -> None:
        key, self._copy_key = self._copy_key, None
        if key is not None and self._store.drop(key):
            self._store.totals.dropped()
