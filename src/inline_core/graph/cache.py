"""The node output cache: outputs of earlier runs, reused when a node's content key matches.

A node's key covers everything its outputs depend on: its type, its normalised params, the keys of
the nodes it reads (with which output of each, per input port), the identity its runner reports,
and the identity of every catalog file a model picker names (so replacing a file misses). Media
references are covered by their ids, which name immutable, content-addressed bytes.

Outputs are stored by reference (engine handles such as loaded models can be large), so runners
must treat their input values as read-only.

A sampling node's entry remembers the step previews its render showed: a run that asks for
previews such an entry did not show renders the node again (with them) instead of reusing it.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from inline_core.errors import ModelMissing, NotFound
from inline_core.graph.descriptor import NodeDescriptor, ParamWidget
from inline_core.graph.runner import CatalogView
from inline_core.runtime.preview import NONE
from inline_core.takes import Take

_KEY_VERSION = "inline-node-cache/1"

# input port -> (upstream node's key, upstream output port) per edge, in edge order
UpstreamKeys = Mapping[str, Sequence[tuple[str, str]]]


def _file_identities(
    descriptor: NodeDescriptor, params: Mapping[str, Any], catalog: CatalogView
) -> dict[str, str]:
    out: dict[str, str] = {}
    for spec in descriptor.params:
        name = params.get(spec.name)
        if spec.options_from is None or not isinstance(name, str):
            continue
        category = spec.category_for(name, catalog.options) or spec.options_from
        try:
            out[spec.name] = catalog.identity(category, name)
        except NotFound as exc:
            raise ModelMissing(
                f"model {name!r} is no longer in {category}/: {exc.message}"
            ) from exc
    return out


def _media_ids(descriptor: NodeDescriptor, params: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for spec in descriptor.params:
        value = params.get(spec.name)
        if spec.widget == ParamWidget.MEDIA and isinstance(value, Mapping):
            ref = cast(Mapping[str, object], value)
            out[spec.name] = f"{ref.get('ref')}:{ref.get('id')}"
    return out


def key_for(
    descriptor: NodeDescriptor,
    params: Mapping[str, Any],
    upstream: UpstreamKeys,
    catalog: CatalogView,
    runner_identity: str = "",
) -> str:
    """The content key of a node's outputs. Raises `ModelMissing` if a picked file vanished."""
    material = {
        "v": _KEY_VERSION,
        "type": descriptor.type,
        "params": dict(params),
        "upstream": {port: [list(e) for e in edges] for port, edges in sorted(upstream.items())},
        "runner": runner_identity,
        "files": _file_identities(descriptor, params, catalog),
        "media": _media_ids(descriptor, params),
    }
    encoded = json.dumps(material, sort_keys=True, separators=(",", ":"), default=repr)
    return "nk_" + hashlib.sha256(encoded.encode()).hexdigest()


@dataclass(frozen=True)
class CacheEntry:
    outputs: Mapping[str, Any]
    # Takes the node wrote when it ran; a hit in a later run re-issues them under that run.
    takes: tuple[Take, ...] = ()
    # The step previews its render showed (a preview method; "none": none, or not a sampler).
    previews: str = NONE

    def shows(self, previews: str) -> bool:
        """Whether reusing it gives a run what it asked of previews: nothing, or the previews
        its own render showed (they went to that run's clients; a rerun sees none)."""
        return previews == NONE or previews == self.previews


class NodeCache:
    """A thread-safe LRU of node outputs (and the takes they produced), bounded by entry count."""

    def __init__(self, max_entries: int = 64) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, CacheEntry] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> Mapping[str, Any] | None:
        entry = self.get_entry(key)
        return None if entry is None else entry.outputs

    def get_entry(self, key: str, previews: str = NONE) -> CacheEntry | None:
        """The entry under `key`, unless its render did not show the `previews` a run asks for
        (a miss: the node renders again, with them)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or not entry.shows(previews):
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry

    def put(
        self,
        key: str,
        outputs: Mapping[str, Any],
        takes: tuple[Take, ...] = (),
        previews: str = NONE,
    ) -> None:
        with self._lock:
            self._entries[key] = CacheEntry(dict(outputs), takes, previews)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._entries
