"""`/object_info`: the ComfyUI node types this server runs, in ComfyUI's schema.

Exactly the classes the importer reads (`importer.prompt_nodes.COMFY_NODE_TYPES`), each with
ComfyUI's own input specs (`node_defs.py`), and those the served families' recipes add
(`recipe_defs.py`). Model pickers list the catalog's files (so the answer
changes when models are dropped in); `sampler_name` and `scheduler` list what the `sample`
primitive's descriptor offers; image pickers list the uploaded inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

from inline_core.graph.registry import Registry
from inline_core.graph.runner import CatalogView
from inline_core.server.comfy.node_defs import NodeDef, Picker, Spec

SAMPLE = "sample"


class Choices:
    """The classes served (`defs`, by name) and where their pickers' choices come from, read
    once per answer."""

    def __init__(
        self,
        catalog: CatalogView,
        registry: Registry,
        images: Callable[[], list[str]],
        defs: Mapping[str, NodeDef],
    ) -> None:
        self.defs = defs
        self._catalog = catalog
        self._registry = registry
        self._images = images
        self._cache: dict[str, list[str]] = {}

    def of(self, source: str) -> list[str]:
        if source not in self._cache:
            self._cache[source] = self._read(source)
        return self._cache[source]

    def _read(self, source: str) -> list[str]:
        if source == "images":
            return self._images()
        if source in ("samplers", "schedulers"):
            return sampler_options(
                self._registry, "sampler" if source == "samplers" else "scheduler"
            )
        return list(self._catalog.options(source))


def sampler_options(registry: Registry, param: str) -> list[str]:
    """The `sample` primitive's choices for `param` ("sampler" or "scheduler"), as served."""
    if SAMPLE not in registry:
        return []
    spec = registry.descriptor(SAMPLE).param(param)
    return [] if spec is None else [str(o) for o in spec.options]


def spec_json(spec: Spec, choices: Choices) -> list[Any]:
    if isinstance(spec, Picker):
        options = choices.of(spec.source)
        extra = {**spec.options}
        if options:
            extra.setdefault("default", options[0])
        return [list(options), extra] if extra else [list(options)]
    return [_copy(part) for part in spec]


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return dict(cast(dict[str, Any], value))
    if isinstance(value, list):
        return list(cast(list[Any], value))
    return value


def node_json(name: str, node: NodeDef, choices: Choices) -> dict[str, Any]:
    required = {k: spec_json(v, choices) for k, v in node.required.items()}
    optional = {k: spec_json(v, choices) for k, v in node.optional.items()}
    inputs: dict[str, Any] = {"required": required}
    if optional:
        inputs["optional"] = optional
    if node.hidden:
        inputs["hidden"] = dict(node.hidden)
    order: dict[str, list[str]] = {"required": list(required)}
    if optional:
        order["optional"] = list(optional)
    return {
        "input": inputs,
        "input_order": order,
        "output": [kind for kind, _name in node.outputs],
        "output_is_list": [False for _ in node.outputs],
        "output_name": [label for _kind, label in node.outputs],
        "name": name,
        "display_name": node.display_name or name,
        "description": node.description,
        "python_module": node.python_module,
        "category": node.category,
        "output_node": node.output_node,
        "deprecated": False,
        "experimental": False,
    }


def object_info(choices: Choices, only: str | None = None) -> dict[str, Any]:
    names = sorted(choices.defs) if only is None else [n for n in choices.defs if n == only]
    return {name: node_json(name, choices.defs[name], choices) for name in names}


def all_inputs(node: NodeDef) -> Mapping[str, tuple[Spec, bool]]:
    """Each input of `node` with whether it is required."""
    return {
        **{k: (v, True) for k, v in node.required.items()},
        **{k: (v, False) for k, v in node.optional.items()},
    }
