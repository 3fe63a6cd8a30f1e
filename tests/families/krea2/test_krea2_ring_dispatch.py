"""Krea 2's hook into cache-dit's Krea 2 processor under Ring (`krea2/ring.py`): it wraps the
planner module's `_dispatch_attention_fn` for the whole process, so a call that is not the ring's
(a Ulysses split's, the text fusion's) must reach cache-dit's own function unchanged; a ring call
attends as masked SDPA does (the processor's mask: the prompt's padding, then the image's tokens),
and an option the ring does not honour is refused, not dropped. No worker group starts here (the
ring renders: `test_krea2_ring_split.py`)."""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from inline_core.families.krea2.ring import PLANNER, route
from inline_core.families.masked_ring import MaskedRing


def _routed(ring: MaskedRing) -> SimpleNamespace:
    processor = SimpleNamespace(_cp_config=None)
    transformer = SimpleNamespace(
        transformer_blocks=[SimpleNamespace(attn=SimpleNamespace(processor=processor))]
    )
    route(transformer, ring)
    return processor


def _qkv() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 6, 3, 8, generator=gen) for _ in range(3))  # (b, tokens, heads, w)
    mask = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    mask[1, ..., 2:4] = False  # the second row's prompt is padded; its image tokens all real
    return q, k, v, mask


def test_a_call_that_is_not_the_rings_reaches_cache_dits_own_function() -> None:
    module = importlib.import_module(PLANNER)
    q, k, v, mask = _qkv()
    before = module._dispatch_attention_fn(q, k, v, attn_mask=mask, enable_gqa=False)
    _routed(MaskedRing(rank=0, ranks=1))
    wrapped = module._dispatch_attention_fn
    assert type(wrapped).__name__ == "RingDispatch"
    after = module._dispatch_attention_fn(q, k, v, attn_mask=mask, enable_gqa=False)
    assert torch.equal(before, after)
    _routed(MaskedRing(rank=0, ranks=1))  # routed again: wrapped once
    assert module._dispatch_attention_fn is wrapped


def test_a_ring_call_attends_as_masked_sdpa_and_refuses_what_it_cannot_honour() -> None:
    module = importlib.import_module(PLANNER)
    ring = MaskedRing(rank=0, ranks=1)
    processor = _routed(ring)
    assert processor._cp_config is ring
    q, k, v, mask = _qkv()
    # as cache-dit's Krea 2 processor calls it, its key/value heads already repeated
    ours = module._dispatch_attention_fn(q, k, v, attn_mask=mask, enable_gqa=False, cp_config=ring)
    expected = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask
    ).transpose(1, 2)
    torch.testing.assert_close(ours, expected, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="enable_gqa=True"):
        module._dispatch_attention_fn(q, k, v, attn_mask=mask, enable_gqa=True, cp_config=ring)
    with pytest.raises(TypeError, match="by name"):
        module._dispatch_attention_fn(q, k, v, mask, 0.0, cp_config=ring)
