"""What a run needs of a server, and what a server has: plain strings, so the store can match
them in SQL when a server claims runs (a run is claimed only by a server whose capabilities
include every one of its needs).

- `node:<type>`: a runner for that node type;
- `model:<category>/<name>`: that entry in the server's model catalog (a model picker naming it);
- `models:<category>`: some model in that category (a picker left to choose for itself);
- `device:<kind>`: that kind of device (a node whose descriptor requires one, e.g. "cuda").
"""

from __future__ import annotations

from inline_core.graph.registry import Registry
from inline_core.graph.runner import CatalogView
from inline_core.graph.validate import ValidatedGraph
from inline_core.models.catalog import CATEGORIES


def run_needs(validated: ValidatedGraph, catalog: CatalogView | None = None) -> tuple[str, ...]:
    """The needs of the target's closure (the nodes that will run), sorted; a picker of
    several categories needs the one `catalog` lists its name in."""
    needs: set[str] = set()
    by_id = validated.graph.by_id
    for node_id in validated.order:
        node = by_id[node_id]
        descriptor = validated.descriptors[node_id]
        needs.add(f"node:{node.type}")
        if descriptor.requires_device is not None:
            needs.add(f"device:{descriptor.requires_device}")
        for spec in descriptor.params:
            if spec.options_from is None:
                continue
            name = node.params.get(spec.name)
            if isinstance(name, str) and name:
                found = None if catalog is None else spec.category_for(name, catalog.options)
                needs.add(f"model:{found or spec.options_from}/{name}")
            elif not (spec.empty_picks_none or spec.empty_found_anywhere):
                needs.add(f"models:{spec.options_from}")
    return tuple(sorted(needs))


def server_capabilities(
    registry: Registry, catalog: CatalogView, device_kind: str | None
) -> tuple[str, ...]:
    """What this server can serve now: its runnable node types, its catalog, its device."""
    caps = {f"node:{d.type}" for d in registry.descriptors() if registry.runner(d.type) is not None}
    for category in CATEGORIES:
        names = catalog.options(category)
        if names:
            caps.add(f"models:{category}")
        caps.update(f"model:{category}/{name}" for name in names)
    if device_kind is not None:
        caps.add(f"device:{device_kind}")
    return tuple(sorted(caps))
