"""What every split engine is to the rank that runs it, and how it finds the modules to split."""

from __future__ import annotations

from typing import Any, Protocol, cast

from torch import nn


class SplitEngine(Protocol):
    name: str

    def before_job(self, state: Any) -> None:
        """Tell the engine about the request about to run (an engine may keep per-size state)."""
        ...


class NoSplit:
    name = "none"

    def before_job(self, state: Any) -> None:
        return None


def declared(pipeline: object, attribute: str) -> str:
    """The one module path a pipeline declares under `attribute` (spec 003's `_dit_modules`...)."""
    paths: object = getattr(pipeline, attribute, None)
    if not isinstance(paths, list):
        raise TypeError(f"{type(pipeline).__name__} does not declare {attribute}")
    paths = cast(list[str], paths)
    if len(paths) != 1:
        raise TypeError(f"{type(pipeline).__name__}.{attribute} must name exactly one module")
    return paths[0]


def declared_all(pipeline: object, attribute: str) -> list[str]:
    """Every module path a pipeline declares under `attribute` (at least one)."""
    paths: object = getattr(pipeline, attribute, None)
    if not isinstance(paths, list) or not paths:
        raise TypeError(f"{type(pipeline).__name__} declares no {attribute}")
    return [str(path) for path in cast(list[object], paths)]


def resolve_module(root: object, dotted: str) -> nn.Module:
    target: object = root
    for part in dotted.split("."):
        target = getattr(target, part)
    if not isinstance(target, nn.Module):
        raise TypeError(f"{dotted} is a {type(target).__name__}, not a torch module")
    return target


def set_module(root: object, dotted: str, module: nn.Module) -> None:
    parent_path, _, name = dotted.rpartition(".")
    parent = root
    for part in parent_path.split(".") if parent_path else ():
        parent = getattr(parent, part)
    setattr(parent, name, module)
