"""Ring attention that takes Qwen-Image's key mask (imports torch).

cache-dit's ring attention passes one mask, the one of the keys a rank starts with, to every ring
step, and its CPU kernel refuses a mask outright; Qwen-Image's joint attention is masked (a batch's
shorter prompts, the pads that make every stream divide over the ranks). Here every rank knows
the whole sequence's key mask, laid out in rank order (`split_plan.PaddedSplit` builds it as for
Ulysses), so at each ring step the rank masks the keys it holds with their owner's slice of it:
the mask travels with the keys without being sent.

Each step attends the rank's queries to one rank's keys, exactly (float32 scores, a block of
queries at a time to bound the scores' memory), and the steps are merged by their log-sum-exps,
as ring attention does; keys arrive from the previous rank while the current ones are attended.
A query whose keys in a step are all masked takes nothing from that step.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

Arrival = Callable[[], tuple[torch.Tensor, torch.Tensor]]  # waits for the next keys and values
QUERY_BLOCK = 1024  # queries attended at once: their scores are (batch, heads, block, keys)


class MaskedRing:
    """The ring a split transformer's attention runs over: the processors carry it as their
    parallel config, and `install` routes their attention here."""

    def __init__(self, rank: int, ranks: int, group: Any = None) -> None:
        self.rank = rank
        self.ranks = ranks
        self.group = group  # None: the default (world) group

    def attend(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None,
        scale: float | None = None,
    ) -> torch.Tensor:
        """`query`, `key`, `value` (batch, local tokens, heads, head width), this rank's;
        `mask` (batch, 1, 1, every rank's tokens) or (batch, every rank's tokens), True on a key
        to attend, in rank order. Returns this rank's output, shaped as `query`."""
        tokens = int(key.shape[1])
        if mask is not None:
            mask = mask.reshape(mask.shape[0], 1, 1, -1).to(torch.bool)
            if mask.shape[-1] != tokens * self.ranks:
                raise ValueError(
                    f"the ring's key mask covers {mask.shape[-1]} keys, not {self.ranks} ranks "
                    f"of {tokens}"
                )
        scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
        q = query.transpose(1, 2).float() * scale  # (batch, heads, tokens, width)
        merged: tuple[torch.Tensor, torch.Tensor] | None = None
        held_k, held_v = key, value
        for step in range(self.ranks):
            pending = self._pass_on(held_k, held_v) if step + 1 < self.ranks else None
            owner = (self.rank - step) % self.ranks  # keys move one rank on a step
            keys = None if mask is None else mask[..., owner * tokens : (owner + 1) * tokens]
            part = _attend(q, held_k, held_v, keys)
            merged = part if merged is None else _merge(merged, part)
            if pending is not None:
                held_k, held_v = pending()
        assert merged is not None
        return merged[0].transpose(1, 2).to(query.dtype)

    def _pass_on(self, key: torch.Tensor, value: torch.Tensor) -> Arrival:
        """Send this rank's held keys and values to the next rank and receive the previous
        rank's; returns what waits for them."""
        send_to, take_from = (self.rank + 1) % self.ranks, (self.rank - 1) % self.ranks
        if self.group is not None:
            send_to = dist.get_global_rank(self.group, send_to)
            take_from = dist.get_global_rank(self.group, take_from)
        key, value = key.contiguous(), value.contiguous()
        next_k, next_v = torch.empty_like(key), torch.empty_like(value)
        ops = [
            dist.P2POp(dist.isend, key, send_to, group=self.group),
            dist.P2POp(dist.irecv, next_k, take_from, group=self.group),
            dist.P2POp(dist.isend, value, send_to, group=self.group),
            dist.P2POp(dist.irecv, next_v, take_from, group=self.group),
        ]
        requests = dist.batch_isend_irecv(ops)

        def arrived() -> tuple[torch.Tensor, torch.Tensor]:
            for request in requests:
                request.wait()
            return next_k, next_v

        return arrived


def _attend(
    q: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled queries (batch, heads, tokens, width) against one rank's keys: the softmax-weighted
    values and the scores' log-sum-exp per query (-inf where every key is masked)."""
    k = key.transpose(1, 2).float()
    v = value.transpose(1, 2).float()
    outs: list[torch.Tensor] = []
    lses: list[torch.Tensor] = []
    for start in range(0, q.shape[2], QUERY_BLOCK):
        scores = torch.matmul(q[:, :, start : start + QUERY_BLOCK], k.transpose(-1, -2))
        if mask is not None:
            scores = scores.masked_fill(~mask, -math.inf)
        lse = torch.logsumexp(scores, dim=-1, keepdim=True)
        weights = torch.exp(scores - _finite(lse))
        outs.append(torch.matmul(weights, v))
        lses.append(lse)
    return torch.cat(outs, dim=2), torch.cat(lses, dim=2)


Attended = tuple[torch.Tensor, torch.Tensor]  # softmax-normalised output, log-sum-exp


def _merge(first: Attended, second: Attended) -> Attended:
    """Two steps' softmax-normalised outputs as one, weighted by their log-sum-exps."""
    (out, lse), (part, part_lse) = first, second
    both = torch.logaddexp(lse, part_lse)
    at = _finite(both)
    return out * torch.exp(lse - at) + part * torch.exp(part_lse - at), both


def _finite(lse: torch.Tensor) -> torch.Tensor:
    """`lse` with -inf (nothing attended) raised to the lowest float: exp(-inf - it) is 0."""
    return lse.clamp_min(torch.finfo(lse.dtype).min)


class _RingDispatch:
    """diffusers' `dispatch_attention_fn` as Qwen-Image's processor calls it, sending a call whose
    parallel config is a `MaskedRing` to it; every other call goes on as it was."""

    def __init__(self, original: Any) -> None:
        self.original = original

    def __call__(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attn_mask: torch.Tensor | None = None,
        *args: Any,
        parallel_config: Any = None,
        **kwargs: Any,
    ) -> torch.Tensor:
        if isinstance(parallel_config, MaskedRing):
            _refuse_unhonoured(args, kwargs)
            return parallel_config.attend(query, key, value, attn_mask, kwargs.get("scale"))
        call = self.original
        return call(query, key, value, attn_mask, *args, parallel_config=parallel_config, **kwargs)


# What the ring attends as `dispatch_attention_fn`'s defaults say; another value is refused, not
# dropped (`backend` names a kernel: the ring's own stands in for every one).
_RING_DEFAULTS: dict[str, Any] = {
    "dropout_p": 0.0,
    "is_causal": False,
    "enable_gqa": False,
    "return_lse": False,
}


def _refuse_unhonoured(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    if args:
        raise TypeError("the ring attention takes dispatch_attention_fn's options by name")
    for name, value in kwargs.items():
        if name in _RING_DEFAULTS and value != _RING_DEFAULTS[name]:
            raise ValueError(f"the ring attention does not take {name}={value!r}")
        if name not in _RING_DEFAULTS and name not in ("scale", "backend"):
            raise TypeError(f"the ring attention does not take {name!r}")


def route(transformer: Any, ring: MaskedRing) -> None:
    """Run the attention of `transformer`'s blocks over `ring`: its processors carry the ring as
    their parallel config (where cache-dit put its own), and the processor's module-level
    `dispatch_attention_fn` hands such calls to it."""
    module = importlib.import_module("diffusers.models.transformers.transformer_qwenimage")
    dispatch = getattr(module, "dispatch_attention_fn", None)
    if dispatch is None:
        raise RuntimeError("this diffusers' Qwen-Image processor has no dispatch_attention_fn")
    if not isinstance(dispatch, _RingDispatch):
        setattr(module, "dispatch_attention_fn", _RingDispatch(dispatch))  # noqa: B010
    for block in transformer.transformer_blocks:
        block.attn.processor._parallel_config = ring
