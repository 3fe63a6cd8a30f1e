"""The registry: node type -> (descriptor, runner). Model families register into it at start-up."""

from __future__ import annotations

import hashlib
import json
import threading
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
        # Counts the changes, so a value derived from the registry as it was before one (a pack
        # reloaded on its thread while a graph was checked) is never kept (`keep_derived`).
        self.generation = 0
        self._derived_lock = threading.Lock()

    def register(self, descriptor: NodeDescriptor, runner: NodeRunner | None = None) -> None:
        self._descriptors[descriptor.type] = descriptor
        if runner is not None:
            self._runners[descriptor.type] = runner
        else:
            self._runners.pop(descriptor.type, None)
        self._changed()

    def mark_unavailable(self, node_type: str, reason: str) -> None:
        """Keep serving the descriptor but refuse to run it, saying why."""
        descriptor = self._descriptors[node_type]
        self._descriptors[node_type] = replace(descriptor, unavailable_reason=reason)
        self._runners.pop(node_type, None)
        self._changed()

    def _changed(self) -> None:
        with self._derived_lock:
            self.generation += 1
            self.derived.clear()

    def kept_derived(self, key: Hashable) -> object | None:
        """What `keep_derived` kept under `key` (now the most recently used), or None."""
        with self._derived_lock:
            value = self.derived.get(key)
            if value is not None:
                self.derived.move_to_end(key)
            return value

    def keep_derived(self, key: Hashable, value: object, generation: int, most: int) -> None:
        """Keep `value`, derived from the registry at `generation`, unless it changed since;
        at most `most` values, the least recently used forgotten first."""
        with self._derived_lock:
            if generation != self.generation:
                return
            self.derived[key] = value
            while len(self.derived) > most:
                self.derived.popitem(last=False)

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
