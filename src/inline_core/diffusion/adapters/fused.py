"""A private fused copy of a model's adapted layers: for each linear layer one stack adapts, its
weight plus the stack's deltas (`sum of strength * up @ down`, added in float32 and rounded to the
weight's dtype once), as PEFT's `fuse_lora` computes it, but into new tensors.

The shared base weights are never written. While a forward runs on the copy, each adapted layer's
`weight` parameter is the copy's and the base one is put back after it, on the one thread that
runs forwards; a layer the stack does not adapt keeps its base weight. Everything else (biases,
norms, other layers) stays shared.
"""

from __future__ import annotations

from collections.abc import Generator, Hashable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn

from inline_core.diffusion.adapters.plan import RowStack, merged_row


@dataclass(eq=False)
class FusedCopy:
    key: Hashable  # the stack it fuses (its files' identities and strengths), on one model
    weights: Mapping[str, nn.Parameter]  # module name -> its fused weight

    @property
    def nbytes(self) -> int:
        return sum(w.numel() * w.element_size() for w in self.weights.values())


def adapted(modules: Mapping[str, nn.Module], row: RowStack) -> list[str]:
    """The linear layers `row` adapts (at a strength that is not zero), in name order."""
    names = {m for weights, _s in merged_row(row) for m in weights.layers}
    return sorted(name for name in names if isinstance(modules.get(name), nn.Linear))


def copy_bytes(modules: Mapping[str, nn.Module], row: RowStack) -> int:
    """What a fused copy of `row` on `modules` takes: one weight per adapted layer."""
    total = 0
    for name in adapted(modules, row):
        weight = modules[name].weight
        assert isinstance(weight, torch.Tensor)
        total += weight.numel() * weight.element_size()
    return total


def fusable(modules: Mapping[str, nn.Module], row: RowStack) -> bool:
    """Whether a fused copy can hold `row`'s layers: none of them is stored in fp8 (a copy would
    round its deltas to fp8, and a scaled fp8 layer multiplies whatever weight it holds by its
    scale). Those layers add their deltas per row."""
    for name in adapted(modules, row):
        weight = modules[name].weight
        assert isinstance(weight, torch.Tensor)
        if weight.element_size() < 2:
            return False
    return True


def fuse(key: Hashable, modules: Mapping[str, nn.Module], row: RowStack) -> FusedCopy:
    """The copy of `row` on `modules`: new tensors, the base weights only read."""
    merged = merged_row(row)
    weights: dict[str, nn.Parameter] = {}
    with torch.no_grad():
        for name in adapted(modules, row):
            base = modules[name].weight
            assert isinstance(base, torch.Tensor)
            total = base.to(torch.float32)  # a copy where the weights are not float32 already
            if total is base:
                total = base.clone()
            for weights_of, strength in merged:
                pair = weights_of.layers.get(name)
                if pair is None:
                    continue
                delta = pair.down_t.to(torch.float32) @ pair.up_t.to(torch.float32)  # (in, out)
                total.add_(delta.T, alpha=strength)
            weights[name] = nn.Parameter(total.to(base.dtype), requires_grad=False)
    return FusedCopy(key, weights)


@contextmanager
def swapped_in(modules: Mapping[str, nn.Module], copy: FusedCopy) -> Generator[None]:
    """Within the block the adapted layers compute with the copy's weights; the base weights are
    put back after it, however it ends."""
    saved: dict[str, torch.Tensor | nn.Module] = {}
    try:
        for name, weight in copy.weights.items():
            module = modules[name]
            saved[name] = module.weight
            module.weight = weight  # a Parameter: registered in the base's place, nothing copied
        yield
    finally:
        for name, base in saved.items():
            modules[name].weight = base
