"""A transformer's repeated blocks, found the same way for every family.

A diffusers model names its block classes (`_repeated_blocks`, which diffusers' own regional
compile reads); any other module's blocks are the members of the `nn.ModuleList`s it and its
direct children hold, as the cancel hooks find them.
"""

from __future__ import annotations

from torch import nn


def listed_blocks(model: nn.Module) -> list[nn.Module]:
    """The members of the `nn.ModuleList`s `model` and its direct children hold."""
    return [
        block
        for holder in (model, *model.children())
        for child in holder.children()
        if isinstance(child, nn.ModuleList)
        for block in child
    ]


def repeated_blocks(model: nn.Module) -> list[nn.Module]:
    """The blocks of the classes `model` declares repeated (`_repeated_blocks`), else its listed
    blocks."""
    declared = getattr(model, "_repeated_blocks", None)
    if isinstance(declared, list | tuple) and declared:
        names = {str(name) for name in declared}  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
        found = [module for module in model.modules() if type(module).__name__ in names]
        if found:
            return found
    return listed_blocks(model)
