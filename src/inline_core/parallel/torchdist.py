"""Typed seam over the parts of `torch.distributed` the ranks use.

torch leaves some parameters of these functions unannotated; the `reportUnknownMemberType`
ignores below are confined to this file for that reason.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, cast

import torch
import torch.distributed as dist

Group = Any  # a ProcessGroup, or None for the default group


def init(backend: str, timeout: timedelta) -> None:
    dist.init_process_group(backend=backend, timeout=timeout)


def new_gloo_group() -> Group:
    new_group = cast(Callable[..., Any], dist.new_group)  # pyright: ignore[reportUnknownMemberType]
    return new_group(backend="gloo")


def all_gather_object(value: object, world_size: int, group: Group = None) -> list[Any]:
    out: list[Any] = [None] * world_size
    gather = cast(Callable[..., None], dist.all_gather_object)  # pyright: ignore[reportUnknownMemberType]
    gather(out, value, group=group)
    return out


def broadcast_ints(values: Sequence[int] | None, size: int, group: Group = None) -> list[int]:
    """Rank 0's `values` (exactly `size` of them), on every rank: one int64 broadcast."""
    if values is None:
        tensor = torch.empty(size, dtype=torch.int64)
    else:
        tensor = torch.tensor(list(values), dtype=torch.int64)
        if tensor.numel() != size:
            raise ValueError(f"{tensor.numel()} values for a broadcast of {size}")
    dist.broadcast(tensor, src=0, group=group)
    values_out = cast(list[int], tensor.tolist())  # pyright: ignore[reportUnknownMemberType]
    return values_out


def broadcast_bytes(data: bytes | None, length: int, group: Group = None) -> bytes:
    """Rank 0's `data` (`length` bytes, told the others beforehand), on every rank."""
    if data is None:
        tensor = torch.empty(length, dtype=torch.uint8)
    else:
        tensor = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    dist.broadcast(tensor, src=0, group=group)
    return tensor.numpy().tobytes()


def broadcast_flag(flag: bool, group: Group = None) -> bool:
    """Rank 0's `flag`, on every rank (one int32 over the given group)."""
    tensor = torch.tensor([1 if flag else 0], dtype=torch.int32)
    dist.broadcast(tensor, src=0, group=group)
    return int(tensor[0]) != 0


class PendingFlag:
    """A flag broadcast from rank 0 that is still in flight (see `start_flag`)."""

    def __init__(self, tensor: torch.Tensor, work: Any) -> None:
        self._tensor = tensor
        self._work = work

    def result(self) -> bool:
        self._work.wait()
        return int(self._tensor[0]) != 0


def start_flag(flag: bool, group: Group = None) -> PendingFlag:
    """Begin broadcasting rank 0's `flag` without waiting for the peers."""
    tensor = torch.tensor([1 if flag else 0], dtype=torch.int32)
    broadcast = cast(Callable[..., Any], dist.broadcast)
    return PendingFlag(tensor, broadcast(tensor, src=0, group=group, async_op=True))


def barrier(group: Group = None) -> None:
    cast(Callable[..., Any], dist.barrier)(group=group)  # pyright: ignore[reportUnknownMemberType]


def destroy() -> None:
    dist.destroy_process_group()
