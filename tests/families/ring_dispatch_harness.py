"""A family's hook into its processors' attention dispatch under Ring (`masked_ring.RingRoute`),
in process, no worker group: the route wraps the module's dispatch function for the whole
process, so a call that is not the ring's (any in-process render, a Ulysses split's) must reach
the function it wrapped unchanged; a ring call, passed as the family's processor passes it,
attends as SDPA does (under its key mask where the family masks), and an option the ring does
not honour is refused, not dropped. One harness for Qwen-Image, Krea 2 and FLUX.2."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from inline_core.families.masked_ring import MaskedRing, RingRoute


@dataclass(frozen=True)
class DispatchCase:
    """How a family's processor calls its dispatch: `route`, whether it passes a key mask
    (`masked`), the options it passes besides (`options`), and one option the ring refuses."""

    route: RingRoute
    masked: bool
    refused: tuple[str, Any]
    options: dict[str, Any] = field(default_factory=dict[str, Any])


def _routed(case: DispatchCase, ring: MaskedRing) -> list[SimpleNamespace]:
    """A transformer of one block per block list routed over `ring`: the blocks' processors."""
    processors = [SimpleNamespace(**{f"_{case.route.config}": None}) for _name in case.route.blocks]
    transformer = SimpleNamespace(
        **{
            name: [SimpleNamespace(attn=SimpleNamespace(processor=processor))]
            for name, processor in zip(case.route.blocks, processors, strict=True)
        }
    )
    case.route.route(transformer, ring)
    return processors


def _qkv(
    case: DispatchCase,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(batch, tokens, heads, width) queries, keys, values, and a key mask (batch, 1, 1, tokens)
    where the family masks: the second row's middle keys are padding."""
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 6, 3, 8, generator=gen) for _ in range(3))
    if not case.masked:
        return q, k, v, None
    mask = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    mask[1, ..., 2:4] = False
    return q, k, v, mask


def assert_other_calls_reach_the_wrapped_function(case: DispatchCase) -> None:
    module = importlib.import_module(case.route.module)
    q, k, v, mask = _qkv(case)
    before = getattr(module, case.route.function)(q, k, v, attn_mask=mask, **case.options)
    _routed(case, MaskedRing(rank=0, ranks=1))
    wrapped = getattr(module, case.route.function)
    assert type(wrapped).__name__ == "RingDispatch"
    after = wrapped(q, k, v, attn_mask=mask, **case.options)
    assert torch.equal(before, after)
    _routed(case, MaskedRing(rank=0, ranks=1))  # routed again: wrapped once
    assert getattr(module, case.route.function) is wrapped


def assert_ring_calls_attend_as_sdpa_and_refuse_what_they_cannot_honour(
    case: DispatchCase,
) -> None:
    ring = MaskedRing(rank=0, ranks=1)
    processors = _routed(case, ring)
    config = f"_{case.route.config}"
    assert all(getattr(processor, config) is ring for processor in processors)
    dispatch = getattr(importlib.import_module(case.route.module), case.route.function)
    q, k, v, mask = _qkv(case)
    expected = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask
    ).transpose(1, 2)
    # the mask as the ring reads it either way: (batch, 1, 1, tokens) or (batch, tokens)
    masks = [mask] if mask is None else [mask, mask.reshape(2, -1)]
    for keys in masks:
        ours = dispatch(q, k, v, attn_mask=keys, **case.options, **{case.route.config: ring})
        torch.testing.assert_close(ours, expected, rtol=1e-5, atol=1e-5)
    name, value = case.refused
    with pytest.raises(ValueError, match=f"{name}={value!r}"):
        options = {**case.options, name: value}
        dispatch(q, k, v, attn_mask=mask, **options, **{case.route.config: ring})
    with pytest.raises(TypeError, match="by name"):
        dispatch(q, k, v, mask, 0.0, **{case.route.config: ring})
