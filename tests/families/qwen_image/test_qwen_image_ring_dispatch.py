"""The ring's hook into diffusers' Qwen-Image processor (`ring_attention.route`): it wraps the
module's `dispatch_attention_fn` for the whole process, so a call that is not the ring's (any
in-process render, split or not) must reach diffusers' own function unchanged; a ring call
attends as masked SDPA does, and an option the ring does not honour is refused, not dropped."""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from inline_core.families.masked_ring import MaskedRing
from inline_core.families.qwen_image.ring_attention import route

MODULE = "diffusers.models.transformers.transformer_qwenimage"


def _routed(ring: MaskedRing) -> SimpleNamespace:
    processor = SimpleNamespace(_parallel_config=None)
    transformer = SimpleNamespace(
        transformer_blocks=[SimpleNamespace(attn=SimpleNamespace(processor=processor))]
    )
    route(transformer, ring)
    return processor


def _qkv() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    q, k, v = (
        torch.randn(2, 6, 3, 8, generator=gen) for _ in range(3)
    )  # (batch, tokens, heads, width)
    mask = torch.ones(2, 6, dtype=torch.bool)
    mask[1, 4:] = False  # the second row's last keys are pads
    return q, k, v, mask


def test_a_call_that_is_not_the_rings_reaches_diffusers_own_function() -> None:
    module = importlib.import_module(MODULE)
    q, k, v, mask = _qkv()
    before = module.dispatch_attention_fn(q, k, v, attn_mask=mask[:, None, None, :])
    _routed(MaskedRing(rank=0, ranks=1))
    wrapped = module.dispatch_attention_fn
    assert wrapped is not None and type(wrapped).__name__ == "RingDispatch"
    after = module.dispatch_attention_fn(q, k, v, attn_mask=mask[:, None, None, :])
    assert torch.equal(before, after)
    _routed(MaskedRing(rank=0, ranks=1))  # routed again: wrapped once
    assert module.dispatch_attention_fn is wrapped


def test_a_ring_call_attends_as_masked_sdpa_and_refuses_what_it_cannot_honour() -> None:
    module = importlib.import_module(MODULE)
    ring = MaskedRing(rank=0, ranks=1)
    processor = _routed(ring)
    q, k, v, mask = _qkv()
    ours = module.dispatch_attention_fn(
        q, k, v, attn_mask=mask, parallel_config=processor._parallel_config
    )
    expected = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask[:, None, None, :]
    ).transpose(1, 2)
    torch.testing.assert_close(ours, expected, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="is_causal=True"):
        module.dispatch_attention_fn(q, k, v, attn_mask=mask, is_causal=True, parallel_config=ring)
    with pytest.raises(TypeError, match="by name"):
        module.dispatch_attention_fn(q, k, v, mask, 0.0, parallel_config=ring)
