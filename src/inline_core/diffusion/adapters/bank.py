"""Adapter weights loaded once per file and kept while there is room: in process in the server's
residency cache (one budget with the models, LRU), in a worker group's rank in a small LRU of its
own. A bank belongs to one model (its device and dtype) and owns that model's row hooks; in
process it also has the model's fusing (`fusing.py`): a whole forward (`forward`) may run on a
fused copy of the stack every row holds, where the device policy says one pays."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from contextlib import AbstractContextManager

import torch
from torch import nn

from inline_core.device.adapters import AdapterMode, adapter_mode
from inline_core.diffusion.adapters.fused import swapped_in
from inline_core.diffusion.adapters.fusing import CopyStore, Fusing
from inline_core.diffusion.adapters.plan import RowStack
from inline_core.diffusion.adapters.rows import RowAdapters
from inline_core.diffusion.adapters.stack import LoraStack, LoraUse
from inline_core.diffusion.adapters.weights import LoraWeights
from inline_core.diffusion.placement import PlacementLike, torch_dtype
from inline_core.diffusion.residency import Footprint

# (key, load) -> the value, loading it on a miss: `ResidentCache.get` or `LocalCache.get`.
Fetch = Callable[[Hashable, Callable[[], tuple[LoraWeights, Footprint]]], LoraWeights]
# (name, path, device, dtype) -> the file's weights, converted to the model's naming.
Reader = Callable[[str, str, torch.device, torch.dtype], LoraWeights]

RANK_CACHE_FILES = 32


class LocalCache:
    """An LRU of loaded adapters, for a process without the server's residency (a rank)."""

    def __init__(self, size: int = RANK_CACHE_FILES) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._items: OrderedDict[Hashable, LoraWeights] = OrderedDict()

    def get(self, key: Hashable, load: Callable[[], tuple[LoraWeights, Footprint]]) -> LoraWeights:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        value, _footprint = load()
        with self._lock:
            self._items[key] = value
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return value


class AdapterBank:
    def __init__(
        self,
        model: nn.Module,
        read: Reader,
        device: torch.device,
        dtype: torch.dtype,
        fetch: Fetch | None = None,
        scope: Hashable = "",
        copies: CopyStore | None = None,
        mode: AdapterMode | None = None,
        copy_scope: Hashable = None,
    ) -> None:
        self.rows = RowAdapters.of(model)
        # Fused copies where the residency can count them (a rank's model has none: per row),
        # named by `copy_scope` (default `scope`: it must tell apart models sharing a scope).
        self.fusing = (
            None
            if copies is None or mode is None
            else Fusing.of(model, mode, copies, scope if copy_scope is None else copy_scope)
        )
        self._read = read
        self._device = device
        self._dtype = dtype
        self._fetch: Fetch = fetch or LocalCache().get
        self._scope = scope  # the model the weights were checked against (its resident key)
        self._lock = threading.Lock()
        self.loads = 0  # files read (a cache miss each)

    @classmethod
    def placed(
        cls,
        model: nn.Module,
        read: Reader,
        placement: PlacementLike,
        fetch: Fetch | None,
        scope: Hashable,
        copies: CopyStore | None,
        copy_scope: Hashable = None,
    ) -> AdapterBank:
        """A bank for a model placed as `placement`: its device, dtype and adapter mode."""
        mode = adapter_mode(placement.offload, placement.quantize, placement.lora_fusing)
        device, dtype = torch.device(placement.device), torch_dtype(placement.dtype)
        return cls(model, read, device, dtype, fetch, scope, copies, mode, copy_scope)

    def weights(self, use: LoraUse) -> LoraWeights:
        key = ("lora", self._scope, use.identity, str(self._device), str(self._dtype))
        return self._fetch(key, lambda: self._load(use))

    def _load(self, use: LoraUse) -> tuple[LoraWeights, Footprint]:
        weights = self._read(use.name, use.path, self._device, self._dtype)
        weights.check_against(self.rows.modules)
        with self._lock:
            self.loads += 1
        return weights, Footprint(weights.nbytes)

    def check(self, stack: LoraStack) -> None:
        """Load (or find) every file of a stack and check it fits the model: before a request
        joins a batch, so a bad file fails that request alone."""
        for use in stack:
            self.weights(use)

    def resolve(self, stacks: Sequence[LoraStack]) -> list[RowStack]:
        return [[(self.weights(use), use.strength) for use in stack] for stack in stacks]

    def applied(self, stacks: Sequence[LoraStack]) -> AbstractContextManager[None]:
        """Within the block, row `i` of the model's forward gets `stacks[i]` (none: no row has
        one, and the hooks add nothing), per row on the shared weights."""
        return self.rows.rows(self.resolve(stacks) if any(stacks) else [])

    def forward(self, stacks: Sequence[LoraStack]) -> AbstractContextManager[None]:
        """`applied`, for one whole forward of the model: counted for the fusing policy, and on
        the fused copy of the stack every row holds where the policy made one."""
        if self.fusing is None:
            return self.applied(stacks)
        first = stacks[0] if stacks else ()
        copy = self.fusing.choose(stacks, lambda: self.resolve([first])[0])
        return self.applied(stacks) if copy is None else swapped_in(self.rows.modules, copy)
