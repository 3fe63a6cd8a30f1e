"""Import a ComfyUI workflow (either format) as an Inline Core graph plus a target.

    result = import_comfy(workflow_json, catalog)
    result.to_json()  # {"graph", "target", "family", "changesPicture", "unmatchedModels",
                      #  "skipped", "warnings"}

All ComfyUI format knowledge lives in this package: `workflow.py` (the flat model and the API
format), `ui_format.py` (the UI format and its subgraphs), `widgets.py` (ComfyUI's node classes),
`mapper.py` and its handler modules (onto our node vocabulary: `handlers.py` lists them, with
the served families' recipes' handlers, `recipes.py`), `own_node.py` (a family's template chain
onto its own node, as its recipe says, for a family without the low-level vocabulary),
`model_files.py` and `samplers.py` (names onto ours). The importer names no family.
Garbage raises `InvalidRequest` (422). A workflow built for a model family this server does not
run is refused naming the family (`recognise.py`), and so is one whose point is a node we cannot
apply (a ControlNet: `dropped.py`). Other nodes we cannot map are reported, never fatal, unless
nothing that makes an image is left; one dropped on the way to the image is listed under
`changesPicture`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from inline_core.errors import InvalidRequest
from inline_core.graph.descriptor import NodeDescriptor
from inline_core.graph.mask_nodes import INPUT_MASK, MASK_NODES
from inline_core.graph.primitives import PRIMITIVE_DESCRIPTORS
from inline_core.graph.registry import Registry
from inline_core.graph.runner import CatalogView
from inline_core.graph.schema import Graph
from inline_core.graph.sources import INPUT_IMAGE, INPUT_TEXT
from inline_core.importer.dropped import Change, UnsupportedNode
from inline_core.importer.facts import ModelFacts
from inline_core.importer.handlers import CORE, handler_table
from inline_core.importer.mapper import UNUSED, Mapper
from inline_core.importer.recipes import Recipes, reader
from inline_core.importer.recognise import Recognition, UnsupportedFamily, recognise
from inline_core.importer.switches import resolve_switches
from inline_core.importer.ui_format import read_ui
from inline_core.importer.workflow import Skipped, Workflow, read_api

__all__ = ["ImportResult", "Skipped", "import_comfy", "import_request", "read_workflow"]

# ComfyUI's output nodes start so (SaveVideo, SaveAudio, SaveGLB, PreviewAny, ...).
OUTPUT_PREFIXES = ("Save", "Preview")
# The node types an imported graph is made of.
TARGET_VOCABULARY: tuple[NodeDescriptor, ...] = (
    *PRIMITIVE_DESCRIPTORS,
    INPUT_TEXT,
    INPUT_IMAGE,
    INPUT_MASK,
    *(descriptor for descriptor, _runner in MASK_NODES),
)


@dataclass(frozen=True)
class ImportResult:
    graph: Graph
    target: str
    skipped: list[Skipped] = field(default_factory=list[Skipped])
    warnings: list[str] = field(default_factory=list[str])
    family: Recognition = Recognition(None)
    changes: list[Change] = field(default_factory=list[Change])
    # Loaders whose file is not in the catalog: {nodeId, comfyNode, file, category, using,
    # candidates}, so a caller can pick one and import again with `models`.
    unmatched: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])

    def to_json(self) -> dict[str, Any]:
        family = self.family
        return {
            "graph": self.graph.to_json(),
            "target": self.target,
            "family": (
                None if family.family is None else {"name": family.family, "title": family.title}
            ),
            "changesPicture": [c.to_json() for c in self.changes],
            "unmatchedModels": [dict(m) for m in self.unmatched],
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
            if isinstance(name, str) and name not in CORE:
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
    models: Mapping[str, str] | None = None,
) -> ImportResult:
    """Convert a ComfyUI workflow into a graph and the node to run.

    `assets` maps ComfyUI image names (LoadImage's file) to asset ids uploaded here; `registry`,
    when given, supplies the served descriptors (allowed samplers, param ranges) and the nodes
    that declare a ComfyUI class they stand in for; `facts`, what the server's model families
    know of the model files (which family takes one, their flow shifts): with it, a workflow
    for a family the server does not run is refused. `models` maps the workflow's model file
    names onto the catalog's, as the caller chose them.
    """
    declared = declared_classes(registry)
    recipes = Recipes.served(facts)
    orders = {**recipes.widget_orders(), **_widget_orders(declared)}
    flat = resolve_switches(read_workflow(workflow, orders))
    renamed = dict(models or {})
    family = recognise(flat, facts, catalog, renamed) if facts is not None else Recognition(None)
    descriptors = {**vocabulary(registry), **{d.type: d for d in declared.values()}}
    if registry is not None:  # the loaders the recipes load several text encoders onto
        descriptors.update(
            {n: registry.descriptor(n) for n in recipes.encoder_nodes() if n in registry}
        )
    own = family.own_node
    if own is not None:  # the family's own node, as the registry serves it where it can
        own = (
            registry.descriptor(own.type) if registry is not None and own.type in registry else own
        )
        descriptors[own.type] = own
    own_handlers, other_handlers = recipes.handlers(family.family)
    sigma_sources = recipes.sigma_sources()

    def new_mapper() -> Mapper:
        mapper = Mapper(
            flat,
            catalog,
            descriptors,
            dict(assets or {}),
            handler_table(own_handlers, other_handlers, declared),
            recipes.output_types(),
            facts,
            sigma_sources=sigma_sources,
            renamed=renamed,
            family=family.family,
        )
        for warning in family.warnings:
            mapper.warn(warning)
        return mapper

    mapper = new_mapper()
    recipe = recipes.by_family.get(family.family) if family.family is not None else None
    if own is not None and family.family is not None and recipe is not None and recipe.own_node:
        collapse = reader(family.family, recipe)
        try:
            target = collapse(mapper, family.family, own, family.refusal, recipe.own_node).run()
        except (UnsupportedNode, UnsupportedFamily) as refused:  # not the node's chain
            if not family.primitives:
                raise
            mapper = new_mapper()
            try:
                target = _whole(mapper)
            except InvalidRequest:  # nor the low-level vocabulary's: the node's refusal
                raise refused from None
        else:
            if family.primitives and mapper.changes:
                # The node renders it otherwise (a denoise, a schedule it does not offer): the
                # low-level vocabulary may render it as written.
                mapper, target = _exact(new_mapper(), mapper, target)
    else:
        target = mapper.run()
    if target is not None and mapper.passed_images and not _samples(mapper.graph(), target):
        raise UnsupportedNode(
            f"the image this workflow saves is made by {mapper.passed_images[0]}, which "
            "Inline Core cannot run (a cloud API node or a custom node): without it the graph "
            "would return its input image unchanged, so it is not imported"
        )
    if target is None:
        reasons = "; ".join(
            f"{s.class_type} {s.node_id}: {s.reason}" for s in mapper.skipped_list()[:8]
        )
        outputs = sorted(
            {n.class_type for n in flat.nodes.values() if n.class_type.startswith(OUTPUT_PREFIXES)}
            - {"SaveImage", "PreviewImage"}
        )
        raise InvalidRequest(
            "nothing in the workflow makes an image Inline Core can produce: it needs a "
            "SaveImage or PreviewImage fed by nodes that map here"
            + (
                f"; it outputs {', '.join(outputs)}, which Inline Core does not make"
                if outputs
                else ""
            )
            + (f" (skipped: {reasons})" if reasons else "")
        )
    _refuse_open_inputs(mapper, target)
    return ImportResult(
        graph=mapper.graph(),
        target=target,
        skipped=mapper.skipped_list(),
        warnings=list(mapper.warnings),
        family=family,
        changes=list(mapper.changes.values()),
        unmatched=list(mapper.unmatched),
    )


def _whole(mapper: Mapper) -> str:
    """The target of the workflow mapped whole onto the low-level vocabulary (else an
    `InvalidRequest`): something makes its image, and every input on the way is fed."""
    target = mapper.run()
    if target is None:
        raise InvalidRequest("nothing in the workflow maps onto the low-level vocabulary")
    _refuse_open_inputs(mapper, target)
    return target


def _exact(primitives: Mapper, collapsed: Mapper, target: str | None) -> tuple[Mapper, str | None]:
    """The workflow on the low-level vocabulary where it maps there whole with fewer changes
    of picture than onto the family's node; else the node's."""
    try:
        mapped = _whole(primitives)
    except InvalidRequest:
        return collapsed, target
    if len(primitives.changes) >= len(collapsed.changes):
        return collapsed, target
    return primitives, mapped


def _refuse_open_inputs(mapper: Mapper, target: str) -> None:
    """A graph that would fail at submit (a required input left open, because what fed it could
    not be mapped) is refused here, saying what was lost, rather than answered as a graph."""
    graph = mapper.graph()
    nodes = {n.id: n for n in graph.nodes}
    seen: set[str] = set()
    todo = [target]
    while todo:
        node = nodes.get(todo.pop())
        if node is None or node.id in seen:
            continue
        seen.add(node.id)
        descriptor = mapper.descriptors[node.type]
        for port in descriptor.inputs:
            if not port.optional and port.name not in node.inputs:
                lost = "; ".join(
                    f"{s.class_type} {s.node_id}: {s.reason}"
                    for s in mapper.skipped_list()
                    if s.reason != UNUSED
                )
                raise UnsupportedNode(
                    f"the workflow cannot be imported whole: {node.type} {node.id} would have "
                    f"no {port.name!r} input, as what feeds it could not be mapped"
                    + (f" ({lost})" if lost else "")
                )
        todo.extend(edge.source for edges in node.inputs.values() for edge in edges)


def _samples(graph: Graph, target: str) -> bool:
    """Whether anything upstream of `target` (itself included) makes an image from a model."""
    nodes = {n.id: n for n in graph.nodes}
    seen: set[str] = set()
    todo = [target]
    while todo:
        node = nodes.get(todo.pop())
        if node is None or node.id in seen:
            continue
        seen.add(node.id)
        if not node.type.startswith(("input/", "image/", "mask/")):  # inputs, Pillow's edits
            return True
        todo.extend(edge.source for edges in node.inputs.values() for edge in edges)
    return False


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


def _models(raw: object) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InvalidRequest("'models' must be an object {workflowModelFile: catalogFile}")
    out: dict[str, str] = {}
    for name, file in cast(Mapping[object, object], raw).items():
        if not isinstance(name, str) or not isinstance(file, str) or not name or not file:
            raise InvalidRequest("'models' must map workflow model file names to catalog names")
        out[name] = file
    return out


def import_request(
    body: object,
    catalog: CatalogView,
    *,
    registry: Registry | None = None,
    facts: ModelFacts | None = None,
) -> ImportResult:
    """The `POST /v1/import/comfy` body: a workflow in either format, or
    `{"workflow": <workflow>, "assets": {comfyImageName: assetId}, "models": {workflowFile:
    catalogFile}}` to resolve LoadImage files and map model files explicitly."""
    assets: dict[str, str] = {}
    models: dict[str, str] = {}
    workflow: object = body
    if isinstance(workflow, Mapping):
        obj = cast(Mapping[str, object], workflow)
        if _wrapped_workflow(obj) is not None:
            assets = _assets(obj.get("assets"))
            models = _models(obj.get("models"))
    return import_comfy(body, catalog, assets=assets, registry=registry, facts=facts, models=models)
