"""Import a ComfyUI workflow (either format) as an Inline Core graph plus a target.

    result = import_comfy(workflow_json, catalog)
    result.to_json()  # {"graph", "target", "skipped", "warnings"}

All ComfyUI format knowledge lives in this package: `workflow.py` (the flat model and the API
format), `ui_format.py` (the UI format and its subgraphs), `widgets.py` (ComfyUI's node classes),
`mapping.py` (onto our node vocabulary), `model_files.py` and `samplers.py` (names onto ours).
Garbage raises `InvalidRequest` (422); nodes we cannot map are reported, never fatal, unless
nothing that makes an image is left.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from inline_core.errors import InvalidRequest
from inline_core.graph.descriptor import NodeDescriptor
from inline_core.graph.primitives import PRIMITIVE_DESCRIPTORS
from inline_core.graph.registry import Registry
from inline_core.graph.runner import CatalogView
from inline_core.graph.schema import Graph
from inline_core.graph.sources import INPUT_IMAGE, INPUT_TEXT
from inline_core.importer.mapping import Mapper, ModelFacts
from inline_core.importer.ui_format import read_ui
from inline_core.importer.workflow import Skipped, Workflow, read_api

__all__ = ["ImportResult", "Skipped", "import_comfy", "import_request", "read_workflow"]

# The node types an imported graph is made of.
TARGET_VOCABULARY: tuple[NodeDescriptor, ...] = (*PRIMITIVE_DESCRIPTORS, INPUT_TEXT, INPUT_IMAGE)


@dataclass(frozen=True)
class ImportResult:
    graph: Graph
    target: str
    skipped: list[Skipped] = field(default_factory=list[Skipped])
    warnings: list[str] = field(default_factory=list[str])

    def to_json(self) -> dict[str, Any]:
        return {
            "graph": self.graph.to_json(),
            "target": self.target,
            "skipped": [s.to_json() for s in self.skipped],
            "warnings": list(self.warnings),
        }


def read_workflow(
    raw: object, widget_orders: Mapping[str, tuple[str, ...]] | None = None
) -> Workflow:
    """Recognise the format and read it into the flat model.

    The UI format has `nodes` (and `links`); the API format is `{id: {class_type, inputs}}`,
    possibly wrapped as ComfyUI's `/prompt` body `{"prompt": {...}}`. Either may arrive wrapped
    as `{"workflow": {...}}` (a PNG's embedded workflow, or an import request with `assets`).
    """
    if not isinstance(raw, Mapping):
        raise InvalidRequest(
            "a ComfyUI workflow must be a JSON object: the API format {id: {class_type, inputs}} "
            f"or the UI format {{nodes, links}}; got {type(raw).__name__}"
        )
    obj = cast(Mapping[str, object], raw)
    if "nodes" in obj:
        return read_ui(obj, widget_orders)
    prompt = obj.get("prompt")
    if isinstance(prompt, Mapping):
        return read_api(cast(Mapping[str, object], prompt))
    wrapped = _wrapped_workflow(obj)
    if wrapped is not None:
        return read_workflow(wrapped, widget_orders)
    return read_api(obj)


def _wrapped_workflow(obj: Mapping[str, object]) -> Mapping[str, object] | None:
    """`obj["workflow"]` when it holds a workflow (and is not an API node named "workflow")."""
    wrapped = obj.get("workflow")
    if not isinstance(wrapped, Mapping) or "class_type" in wrapped:
        return None
    return cast(Mapping[str, object], wrapped)


def vocabulary(registry: Registry | None) -> dict[str, NodeDescriptor]:
    """Our node types' descriptors: the registry's where it serves them (a model family may offer
    more samplers than the bare descriptors), the built-in ones otherwise."""
    out: dict[str, NodeDescriptor] = {}
    for descriptor in TARGET_VOCABULARY:
        if registry is not None and descriptor.type in registry:
            descriptor = registry.descriptor(descriptor.type)
        out[descriptor.type] = descriptor
    return out


def declared_classes(registry: Registry | None) -> dict[str, NodeDescriptor]:
    """ComfyUI class -> the served node that stands in for it, as its descriptor declares
    (`extra["comfy"]`, as pack nodes carry it). The built-in mapping wins over any of these."""
    out: dict[str, NodeDescriptor] = {}
    for descriptor in registry.descriptors() if registry is not None else ():
        comfy = descriptor.extra.get("comfy")
        if descriptor.unavailable_reason is None and isinstance(comfy, Mapping):
            name = cast(Mapping[str, object], comfy).get("class")
            if isinstance(name, str) and name not in Mapper.HANDLERS:
                out.setdefault(name, descriptor)
    return out


def _widget_orders(declared: Mapping[str, NodeDescriptor]) -> dict[str, tuple[str, ...]]:
    orders: dict[str, tuple[str, ...]] = {}
    for name, descriptor in declared.items():
        widgets = cast(Mapping[str, object], descriptor.extra["comfy"]).get("widgets")
        if isinstance(widgets, list) and widgets:
            orders[name] = tuple(str(w) for w in cast(list[object], widgets))
    return orders


def import_comfy(
    workflow: object,
    catalog: CatalogView,
    *,
    assets: Mapping[str, str] | None = None,
    registry: Registry | None = None,
    facts: ModelFacts | None = None,
) -> ImportResult:
    """Convert a ComfyUI workflow into a graph and the node to run.

    `assets` maps ComfyUI image names (LoadImage's file) to asset ids uploaded here; `registry`,
    when given, supplies the served descriptors (allowed samplers, param ranges) and the nodes
    that declare a ComfyUI class they stand in for; `facts`, what the server's model families
    know of the model files (their flow shifts).
    """
    declared = declared_classes(registry)
    flat = read_workflow(workflow, _widget_orders(declared))
    descriptors = {**vocabulary(registry), **{d.type: d for d in declared.values()}}
    mapper = Mapper(flat, catalog, descriptors, dict(assets or {}), facts, declared)
    target = mapper.run()
    if target is None:
        reasons = "; ".join(
            f"{s.class_type} {s.node_id}: {s.reason}" for s in mapper.skipped_list()[:8]
        )
        raise InvalidRequest(
            "nothing in the workflow makes an image Inline Core can produce: it needs a "
            "SaveImage or PreviewImage fed by nodes that map here"
            + (f" (skipped: {reasons})" if reasons else "")
        )
    return ImportResult(
        graph=mapper.graph(),
        target=target,
        skipped=mapper.skipped_list(),
        warnings=list(mapper.warnings),
    )


def _assets(raw: object) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InvalidRequest("'assets' must be an object {comfyImageName: assetId}")
    out: dict[str, str] = {}
    for name, asset_id in cast(Mapping[object, object], raw).items():
        if not isinstance(name, str) or not isinstance(asset_id, str) or not asset_id:
            raise InvalidRequest("'assets' must map image names to asset id strings")
        out[name] = asset_id
    return out


def import_request(
    body: object,
    catalog: CatalogView,
    *,
    registry: Registry | None = None,
    facts: ModelFacts | None = None,
) -> ImportResult:
    """The `POST /v1/import/comfy` body: a workflow in either format, or
    `{"workflow": <workflow>, "assets": {comfyImageName: assetId}}` to resolve LoadImage files."""
    assets: dict[str, str] = {}
    workflow: object = body
    if isinstance(workflow, Mapping):
        obj = cast(Mapping[str, object], workflow)
        if _wrapped_workflow(obj) is not None:
            assets = _assets(obj.get("assets"))
    return import_comfy(body, catalog, assets=assets, registry=registry, facts=facts)
