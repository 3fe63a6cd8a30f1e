"""Ring attention that takes a key mask (imports torch): the Ring of the families whose joint
attention is masked (Qwen-Image: a batch's shorter prompts and the pads that make every stream
divide over the ranks; Krea 2: its prompts padded to 512 tokens).

cache-dit's ring attention passes one mask, the one of the keys a rank starts with, to every ring
step, and its CPU kernel refuses a mask outright. Here every rank knows the whole sequence's key
mask, laid out in rank order (the order the split shards the sequence in), so at each ring step
the rank masks the keys it holds with their owner's slice of it: the mask travels with the keys
without being sent. A family routes its attention here (its processors' dispatch: `RingRoute`).

Each step attends the rank's queries to one rank's keys, exactly (float32 scores, a block of
queries at a time to bound the scores' memory), and the steps are merged by their log-sum-exps,
as ring attention does; keys arrive from the previous rank while the current ones are attended.
A query whose keys in a step are all masked takes nothing from that step.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

Arrival = Callable[[], tuple[torch.Tensor, torch.Tensor]]  # waits for the next keys and values
QUERY_BLOCK = 1024  # queries attended at once: their scores are (batch, heads, block, keys)


class MaskedRing:
    """The ring a split transformer's attention runs over: the processors carry it as their
    parallel config, and the family's dispatch routes their attention here."""

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
        q, k, v = (self._into_ring(x) for x in (query, key, value))
        return self._out_of_ring(self._ring(q, k, v, mask, scale))

    def _into_ring(self, x: torch.Tensor) -> torch.Tensor:
        """What this rank's queries, keys or values are over the ring: themselves (a ring over
        groups of ranks first gathers its group's, `ulysses_ring.py`)."""
        return x

    def _out_of_ring(self, x: torch.Tensor) -> torch.Tensor:
        """The ring's output as this rank's (the inverse of `_into_ring`)."""
        return x

    def _ring(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None,
        scale: float | None,
    ) -> torch.Tensor:
        """The ring steps over the peers' keys, as `attend` says."""
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


# What the ring attends as diffusers' `dispatch_attention_fn`'s defaults say; another value is
# refused, not dropped (`backend` names a kernel: the ring's own stands in for every one).
RING_DEFAULTS: dict[str, Any] = {
    "dropout_p": 0.0,
    "is_causal": False,
    "enable_gqa": False,
    "return_lse": False,
}


def refuse_unhonoured(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """An attention call's option the ring does not honour is an error, never dropped."""
    if args:
        raise TypeError("the ring attention takes dispatch_attention_fn's options by name")
    for name, value in kwargs.items():
        if name in RING_DEFAULTS and value != RING_DEFAULTS[name]:
            raise ValueError(f"the ring attention does not take {name}={value!r}")
        if name not in RING_DEFAULTS and name not in ("scale", "backend"):
            raise TypeError(f"the ring attention does not take {name!r}")


class RingDispatch:
    """A module's attention dispatch function (`original`) as a family's processor calls it,
    sending a call whose config (the keyword `config` names) is a `MaskedRing` to the ring; every
    other call goes on to `original` as it was."""

    def __init__(self, original: Any, config: str) -> None:
        self.original = original
        self.config = config

    def __call__(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attn_mask: torch.Tensor | None = None,
        *args: Any,
        **kwargs: Any,
    ) -> torch.Tensor:
        ring = kwargs.get(self.config)
        if not isinstance(ring, MaskedRing):
            return self.original(query, key, value, attn_mask, *args, **kwargs)
        options = {name: v for name, v in kwargs.items() if name != self.config}
        refuse_unhonoured(args, options)
        return ring.attend(query, key, value, attn_mask, options.get("scale"))


@dataclass(frozen=True)
class RingRoute:
    """Where a family's split transformer attends: the processors of its `blocks` (each block's
    `attn.processor`) call `module`'s `function` with their parallel config by the keyword
    `config`, kept on them as `_<config>` (where cache-dit put its own)."""

    module: str
    function: str
    config: str
    blocks: tuple[str, ...] = ("transformer_blocks",)

    def route(self, transformer: Any, ring: MaskedRing) -> None:
        """Run the attention of `transformer`'s blocks over `ring`: each processor carries it,
        and `function`, wrapped once per process, hands the calls that pass it to the ring."""
        module = importlib.import_module(self.module)
        dispatch = getattr(module, self.function, None)
        if dispatch is None:
            raise RuntimeError(f"{self.module} has no {self.function} to route the ring through")
        if not isinstance(dispatch, RingDispatch):
            setattr(module, self.function, RingDispatch(dispatch, self.config))
        for name in self.blocks:
            for block in getattr(transformer, name):
                setattr(block.attn.processor, f"_{self.config}", ring)
