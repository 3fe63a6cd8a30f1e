"""Finding a pack's node classes from its manifest's `nodes` table ("name" -> "module:Class")."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from inline_core_sdk.nodes import Node
from inline_core_sdk.version import PROTOCOL_VERSION, sdk_version


class PackLoadError(Exception):
    """A node class the manifest names cannot be imported or is not a `Node`."""


def load_node_class(name: str, target: str) -> type[Node]:
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise PackLoadError(f"node {name!r}: {target!r} is not 'module:Class'")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise PackLoadError(f"node {name!r}: importing {module_name} failed: {exc!r}") from exc
    found: object = getattr(module, attribute, None)
    if not isinstance(found, type) or not issubclass(found, Node):
        raise PackLoadError(f"node {name!r}: {target} is not a subclass of inline_core_sdk.Node")
    return found


def load_nodes(nodes: Mapping[str, str]) -> dict[str, Node]:
    return {name: load_node_class(name, target)() for name, target in nodes.items()}


def describe(nodes: Mapping[str, str]) -> dict[str, Any]:
    """What the server records at install: this SDK's version and every node's declaration."""
    classes = {name: load_node_class(name, target) for name, target in nodes.items()}
    return {
        "sdk": sdk_version(),
        "protocol": PROTOCOL_VERSION,
        "nodes": {name: cls.describe() for name, cls in classes.items()},
    }
