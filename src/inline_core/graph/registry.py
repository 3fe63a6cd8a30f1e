"""The registry: node type -> (descriptor, runner). Model families register into it at start-up."""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import replace

from inline_core.errors import InvalidGraph
from inline_core.graph.descriptor import NodeDescriptor
from inline_core.graph.runner import NodeRunner


class Registry:
    def __init__(self) -> None:
        self._descriptors: dict[str, NodeDescriptor] = {}
        self._runners: dict[str, NodeRunner] = {}
        # What validation derives from these node types alone, per graph shape (`validate.py`
        # keeps it, bounded): forgotten whenever a node type is registered or changed.
        self.derived: OrderedDict[Hashable, object] = OrderedDict()

    def register(self, descriptor: NodeDescriptor, runner: NodeRunner | None = None) -> None:
        self.derived.clear()
        self._descriptors[descriptor.type] = descriptor
        if runner is not None:
            self._runners[descriptor.type] = runner
        else:
            self._runners.pop(descriptor.type, None)

    def mark_unavailable(self, node_type: str, reason: str) -> None:
        """Keep serving the descriptor but refuse to run it, saying why."""
        descriptor = self._descriptors[node_type]
        self.derived.clear()
        self._descriptors[node_type] = replace(descriptor, unavailable_reason=reason)
        self._runners.pop(node_type, None)

    def __contains__(self, node_type: object) -> bool:
        return node_type in self._descriptors

    def descriptor(self, node_type: str) -> NodeDescriptor:
        try:
            return self._descriptors[node_type]
        except KeyError:
            raise InvalidGraph(f"unknown node type {node_type!r}") from None

    def runner(self, node_type: str) -> NodeRunner | None:
        return self._runners.get(node_type)

    def descriptors(self) -> list[NodeDescriptor]:
        return [self._descriptors[k] for k in sorted(self._descriptors)]

    def version(self, catalog_fingerprint: str = "") -> str:
        """`r_<hex>`: changes whenever a descriptor or the model files behind pickers change."""
        h = hashlib.sha256()
        for d in self.descriptors():
            h.update(json.dumps(d.to_json(), sort_keys=True, default=str).encode())
        h.update(catalog_fingerprint.encode())
        return "r_" + h.hexdigest()[:16]
