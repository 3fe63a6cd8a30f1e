"""A LoRA's input on a layer whose output a context-parallel split gathers (imports torch).

cache-dit (and diffusers) shard a transformer's token sequence over the ranks and gather it back
in the call of the model's last projection (Wan's `proj_out`): the gather wraps that layer's own
forward, so a forward hook on it sees the rank's shard going in and the whole sequence coming out.
A LoRA delta on such a layer is computed on the whole input, gathered the same way (evenly, in
rank order, along the tokens), so every rank adds the delta one process would.
"""

from __future__ import annotations

from typing import Any, cast

import torch


def whole_input(x: torch.Tensor, tokens: int) -> torch.Tensor:
    """`x` (rows, this rank's tokens, features) gathered to `tokens` tokens from every rank."""
    import torch.distributed as dist

    ranks = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
    if x.dim() < 3 or ranks < 2 or int(x.shape[-2]) * ranks != tokens:
        raise RuntimeError(
            f"an adapted layer took {tuple(x.shape)} and gave {tokens} tokens: not a split's gather"
        )
    parts = [torch.empty_like(x) for _ in range(ranks)]
    cast(Any, dist).all_gather(parts, x.contiguous())
    return torch.cat(parts, dim=-2)
