"""`"package.module:attribute"` paths: how plugins, families' torch sides and rank runners are named
without being imported until they are needed."""

from __future__ import annotations

import importlib


def resolve_object(dotted: str) -> object:
    """The attribute a dotted path names (ImportError or AttributeError if it is missing)."""
    module_name, sep, attr = dotted.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"expected 'package.module:attribute', got {dotted!r}")
    target: object = importlib.import_module(module_name)
    for part in attr.split("."):
        target = getattr(target, part)
    return target
