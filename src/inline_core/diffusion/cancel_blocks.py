"""A cancel that takes effect between a transformer's blocks, not only between steps.

Every denoiser part gets a forward pre-hook on each of its repeated blocks (the `nn.ModuleList`s
it and its direct children hold), shared by every family: the hook stops the forward once every
row of it is cancelled (`runtime.cancel.check_forward`, set by the step loop around a forward).
A large render then stops within one block of its cancel instead of finishing its step.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from torch import nn

from inline_core.diffusion.compile.blocks import listed_blocks
from inline_core.runtime.cancel import check_forward

_WATCHED = "_inline_core_cancel_watched"


def _check(_module: nn.Module, _args: Any) -> None:
    check_forward()


def is_watched(model: object) -> bool:
    return bool(getattr(model, _WATCHED, False))


def watch_blocks(model: object) -> int:
    """Hook `model`'s repeated blocks once; how many blocks it has hooks on (0: not a module)."""
    if not isinstance(model, nn.Module):
        return 0
    blocks = listed_blocks(model)
    if not is_watched(model):
        for block in blocks:
            block.register_forward_pre_hook(_check)
        setattr(model, _WATCHED, True)
    return len(blocks)


def watch_denoisers(models: Iterable[object]) -> None:
    """Hook the blocks of every denoiser (the engine names them: a two-expert model's pair too)."""
    for model in models:
        watch_blocks(model)
