"""What the per-model registries keep never keeps the model: a model adapted per row
(`RowAdapters`, its hooks installed by a forward) and adopted by the step cache backend (a cached
forward run through it) is freed once nothing else holds it, as a transformer the residency
evicts must be; its backend lets go of it too."""

from __future__ import annotations

import gc
import weakref

import torch
from torch import nn

from inline_core.diffusion.adapters.rows import RowAdapters
from inline_core.diffusion.adapters.weights import LoraWeights, LowRank, modules_of
from inline_core.diffusion.stepcache.backend import StepCacheBackend, cached_forward
from inline_core.diffusion.stepcache.layout import BlockLayout
from inline_core.diffusion.stepcache.rows import RowCache
from inline_core.runtime.step_cache import StepCacheSettings

WIDTH, RANK, ROWS, TOKENS = 8, 2, 2, 3
LAYOUT = BlockLayout(blocks="blocks", hidden=0, rows={0: True})


class Blocks(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(WIDTH, WIDTH) for _ in range(3)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


def pair(seed: int) -> LowRank:
    g = torch.Generator().manual_seed(seed)
    return LowRank(torch.randn(WIDTH, RANK, generator=g), torch.randn(RANK, WIDTH, generator=g))


def adapted_and_cached() -> tuple[weakref.ref[nn.Module], StepCacheBackend, torch.Tensor]:
    """A model with its row hooks installed and a cached forward run through its backend, and
    nothing left holding it but the registries."""
    model = Blocks().eval()
    adapters = RowAdapters.of(model)
    backend = StepCacheBackend.of(model, LAYOUT)
    backend.add_row_scope(adapters)  # as a pipeline adopting it does
    weights = LoraWeights("l", {"blocks.1": pair(1)})
    caches = [RowCache(StepCacheSettings(warmup=0, front_blocks=1)), None]
    x = torch.randn(ROWS, TOKENS, WIDTH, generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        with adapters.rows([[(weights, 1.0)], []]), cached_forward(backend, model, caches):
            out = model(x)
    assert backend.transformer is model
    return weakref.ref(model), backend, out


def test_a_model_adapted_per_row_and_adopted_by_the_step_cache_is_freed() -> None:
    model, backend, out = adapted_and_cached()
    assert out.shape == (ROWS, TOKENS, WIDTH)
    gc.collect()
    assert model() is None  # neither registry's value kept its key alive
    assert backend.transformer is None
    # A forward through a backend whose model is gone is a plain no-op block.
    with cached_forward(backend, Blocks(), [None]):
        pass


def test_modules_of_leaves_the_model_itself_out() -> None:
    model = Blocks()
    named = modules_of(model)
    assert "" not in named and not any(m is model for m in named.values())
    assert set(named) == {"blocks", "blocks.0", "blocks.1", "blocks.2"}
