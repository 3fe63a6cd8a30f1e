"""The mapping's core: flat ComfyUI nodes onto Inline Core's node vocabulary, working back from
the image outputs, each class through its handler (`handlers.py` builds the table: the core's
handler modules, the served families' recipes, the nodes that declare a class they stand in for).

Each ComfyUI output slot that something downstream needs is mapped once (memoised), so shared
loaders stay shared and our node list comes out in dependency order. Our ids derive from ComfyUI's:
node 9 becomes `c9`, and a node that maps to two of ours adds a suffix (`c6_text` + `c6`).
A node we cannot map is reported in `skipped`; when it has an input of the type its consumer
needs, that input is passed straight through (what ComfyUI does for a bypassed node), and a
warning says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from inline_core.errors import InvalidRequest
from inline_core.graph.descriptor import SEED_MAX, NodeDescriptor, ParamWidget
from inline_core.graph.runner import CatalogView
from inline_core.graph.schema import Edge, Graph, Node, PortKind
from inline_core.importer.dropped import Change, UnsupportedNode, change_reason, refusal
from inline_core.importer.facts import ModelFacts
from inline_core.importer.model_files import match_model_file
from inline_core.importer.sigma_sources import Sigmas
from inline_core.importer.values import COMFY_KINDS, Port, Value, describe
from inline_core.importer.widgets import CONSTANT_TYPES, INPUT_NAMES_BY_TYPE, OUTPUT_TYPES
from inline_core.importer.workflow import ComfyNode, Link, Skipped, Workflow, node_sort_key

SAVE_IMAGE = "SaveImage"
# Our nodes that take a model and hand on the same model, adapted.
MODEL_WRAPPERS = ("load/lora", "load/controlnet")
PREVIEW_IMAGE = "PreviewImage"
DECODERS = ("VAEDecode", "VAEDecodeTiled")
UNUSED = "not connected to an image output"  # why a node nothing needs is skipped


@dataclass
class _Draft:
    id: str
    type: str
    params: dict[str, Any]
    inputs: dict[str, tuple[Port, ...]]  # an input's edges, in order (a `loras` input has many)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# A ComfyUI class's handler: the value its output `slot` becomes (None: nothing to hand on).
Handler = Callable[["Mapper", ComfyNode, int], Value | None]
# A sigmas class's reader (`sigma_sources.py`): the sigmas node, the model the sampler samples.
SigmaSource = Callable[["Mapper", ComfyNode, Value | None], Sigmas]


@dataclass
class Mapper:
    workflow: Workflow
    catalog: CatalogView
    descriptors: Mapping[str, NodeDescriptor]
    assets: Mapping[str, str]
    # ComfyUI class -> its handler (`handlers.py`).
    handlers: Mapping[str, Handler] = field(default_factory=dict[str, Handler])
    # Output types of the classes the families' recipes add, by slot (for the API format).
    output_types: Mapping[str, tuple[str, ...]] = field(default_factory=dict[str, tuple[str, ...]])
    facts: ModelFacts | None = None
    # Sigmas classes the families' recipes read (`sigma_sources.py`), beside the core's.
    sigma_sources: Mapping[str, SigmaSource] = field(default_factory=dict[str, SigmaSource])
    # The caller's explicit model-name mapping: a workflow's file -> the catalog's.
    renamed: Mapping[str, str] = field(default_factory=dict[str, str])
    # The served family the workflow was recognised as (`recognise.py`): its files listed first.
    family: str | None = None
    drafts: dict[str, _Draft] = field(default_factory=dict[str, _Draft])
    changes: dict[str, Change] = field(default_factory=dict[str, Change])
    # Loaders whose file is not in the catalog, with the catalog's candidates.
    unmatched: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    passed_images: list[str] = field(default_factory=list[str])
    warnings: list[str] = field(default_factory=list[str])
    skipped: dict[str, Skipped] = field(default_factory=dict[str, Skipped])
    _memo: dict[tuple[str, int, PortKind], Value | None] = field(
        default_factory=dict[tuple[str, int, PortKind], Value | None]
    )
    _active: set[tuple[str, int]] = field(default_factory=set[tuple[str, int]])
    _used: set[str] = field(default_factory=set[str])

    def __post_init__(self) -> None:
        for item in self.workflow.skipped:
            self.skipped[item.node_id] = item

    # -- bookkeeping ----------------------------------------------------------------------

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def skip(self, node: ComfyNode, reason: str) -> None:
        if node.id not in self.skipped:
            self.skipped[node.id] = Skipped(node.id, node.class_type, reason)

    def used(self, node_id: str) -> bool:
        """Whether a node's value was read (a constant node a widget follows)."""
        return node_id in self._used

    def mark_used(self, node_id: str) -> None:
        """A node read directly, not through a link's value (a loader a patch names)."""
        self._used.add(node_id)

    def output_name(self, node_type: str) -> str:
        return self.descriptors[node_type].outputs[0].name

    def add(
        self,
        node_id: str,
        node_type: str,
        params: Mapping[str, Any],
        inputs: Mapping[str, Port | tuple[Port, ...] | None],
        where: str,
    ) -> Port:
        """Add one of our nodes (once: a second call with the same id returns the first)."""
        if node_id not in self.drafts:
            fitted = {
                name: self.fit(node_type, name, value, where)
                for name, value in params.items()
                if value is not None
            }
            wired = {
                name: (port,) if isinstance(port, Port) else port
                for name, port in inputs.items()
                if port
            }
            self.drafts[node_id] = _Draft(node_id, node_type, fitted, wired)
        return Port(node_id, self.output_name(node_type))

    def fit(self, node_type: str, name: str, value: Any, where: str) -> Any:
        """Bring a ComfyUI value into the range our param allows, saying what changed."""
        spec = self.descriptors[node_type].param(name)
        if spec is None:
            return value
        if spec.widget == ParamWidget.SEED and isinstance(value, int):
            if 0 <= value <= SEED_MAX:
                return value
            folded = value % (SEED_MAX + 1)
            self.warn(f"{where}: seed {value} is outside 0..{SEED_MAX}; using {folded}")
            return folded
        if spec.widget == ParamWidget.NUMBER and _is_number(value):
            number = float(value)
            if spec.minimum is not None:
                number = max(number, spec.minimum)
            if spec.maximum is not None:
                number = min(number, spec.maximum)
            fitted: int | float = number
            if spec.integer:
                step = int(spec.step) if spec.step and float(spec.step).is_integer() else 1
                base = int(spec.minimum) if spec.minimum is not None else 0
                fitted = base + step * math.floor((number - base) / step + 0.5)
                if spec.maximum is not None and fitted > spec.maximum:
                    fitted -= step
            if not math.isclose(fitted, float(value)):
                self.warn(
                    f"{where}: {name} {value!r} is outside what {node_type} takes; using {fitted!r}"
                )
            return fitted
        if spec.max_length is not None and isinstance(value, str) and len(value) > spec.max_length:
            self.warn(f"{where}: {name} was cut to {spec.max_length} characters")
            return value[: spec.max_length]
        return value

    # -- reading ComfyUI inputs -----------------------------------------------------------

    def literal(self, node: ComfyNode, name: str) -> Any:
        """A widget value, following a link to a constant node (PrimitiveInt and the like)."""
        value = node.inputs.get(name)
        seen: set[str] = set()
        while isinstance(value, Link):
            source = self.workflow.nodes.get(value.node)
            if source is None or source.id in seen or source.class_type not in CONSTANT_TYPES:
                shown = describe(source) if source is not None else f"node {value.node}"
                self.warn(
                    f"{describe(node)}: {name} comes from {shown}, whose value cannot be "
                    "known before it runs; using the default"
                )
                return None
            seen.add(source.id)
            self._used.add(source.id)
            value = source.inputs.get("value")
        return value

    def number(self, node: ComfyNode, name: str, default: float) -> float:
        value = self.literal(node, name)
        if value is None:
            return default
        if not _is_number(value):
            self.warn(f"{describe(node)}: {name} {value!r} is not a number; using {default:g}")
            return default
        return float(value)

    def whole(self, node: ComfyNode, name: str, default: int) -> int:
        value = self.literal(node, name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value  # never through a float: seeds go up to 2**64 - 1
        if isinstance(value, float) and math.isfinite(value):
            return round(value)
        if value is not None:
            self.warn(f"{describe(node)}: {name} {value!r} is not a number; using {default}")
        return default

    def text(self, node: ComfyNode, name: str, default: str = "") -> str:
        value = self.literal(node, name)
        if value is None:
            return default
        if not isinstance(value, str):
            return str(value)
        return value

    def link_kind(self, link: Link, input_name: str) -> PortKind | None:
        """The kind of value on a link: from the source's output types, or the input's name."""
        source = self.workflow.nodes.get(link.node)
        if source is not None:
            types = (
                source.output_types
                or OUTPUT_TYPES.get(source.class_type)
                or self.output_types.get(source.class_type)
            )
            if types and link.slot < len(types) and types[link.slot] in COMFY_KINDS:
                return COMFY_KINDS[types[link.slot]]
        for type_name, names in INPUT_NAMES_BY_TYPE.items():
            if input_name in names:
                return COMFY_KINDS[type_name]
        return None

    # -- following values ------------------------------------------------------------------

    def input_value(
        self, node: ComfyNode, name: str, kind: PortKind, *, optional: bool = False
    ) -> Value | None:
        raw = node.inputs.get(name)
        if isinstance(raw, Link):
            return self.value(raw, kind, node, name)
        if not optional:
            self.warn(f"{describe(node)}: input {name!r} is not connected in the workflow")
        return None

    def value(self, link: Link, kind: PortKind, consumer: ComfyNode, name: str) -> Value | None:
        source = self.workflow.nodes.get(link.node)
        if source is None:
            self.warn(
                f"{describe(consumer)}: input {name!r} comes from node {link.node}, "
                "which was left out of the workflow; it stays unconnected"
            )
            return None
        key = (source.id, link.slot, kind)
        if key in self._memo:
            return self._memo[key]
        if (source.id, link.slot) in self._active:
            self.warn(f"{describe(source)}: its output feeds back into itself; the loop was cut")
            return None
        self._active.add((source.id, link.slot))
        self._used.add(source.id)
        try:
            handler = self.handlers.get(source.class_type)
            if handler is None:
                refused = refusal(source.class_type, describe(source))
                if refused is not None:
                    raise UnsupportedNode(refused)
                reason = f"unknown node type {source.class_type!r}: Inline Core has no equivalent"
                result = self.pass_through(source, kind, reason)
            else:
                result = handler(self, source, link.slot)
                if result is not None and result.kind != kind:
                    self.warn(
                        f"{describe(consumer)}: input {name!r} expects {kind.value}, but "
                        f"{describe(source)} gives {result.kind.value}; left unconnected"
                    )
                    result = None
        finally:
            self._active.discard((source.id, link.slot))
        self._memo[key] = result
        return result

    def pass_through(self, node: ComfyNode, kind: PortKind, reason: str) -> Value | None:
        """Skip `node`, handing on its first input of `kind` (as ComfyUI's bypass does)."""
        for name, raw in node.inputs.items():
            if isinstance(raw, Link) and self.link_kind(raw, name) == kind:
                passed = self.value(raw, kind, node, name)
                if passed is not None:
                    self.skip(node, f"{reason}; its {name!r} input was passed straight through")
                    change = Change(node.id, node.class_type, change_reason(node.class_type))
                    if node.id not in self.changes:
                        self.changes[node.id] = change
                        self.warn(change.warning())
                    if kind == PortKind.IMAGE:
                        self.passed_images.append(describe(node))
                    return passed
        self.skip(node, reason)
        return None

    def substituted(self, node: ComfyNode, reason: str) -> None:
        """`node` is carried over, but renders otherwise than in ComfyUI (`reason`): listed
        under `changesPicture`, and said in the warnings."""
        earlier = self.changes.get(node.id)
        if earlier is not None and (earlier.dropped or reason in earlier.reason):
            return
        change = Change(node.id, node.class_type, reason, dropped=False)
        self.changes[node.id] = change
        self.warn(change.warning())
        if earlier is not None:  # one entry a node: its reasons together
            self.changes[node.id] = replace(change, reason=f"{earlier.reason}; {reason}")

    def drop_for(self, node: ComfyNode, name: str, kind: PortKind, reason: str) -> Value | None:
        """Skip `node`, handing on its input `name` of `kind`, listed as a change: `reason`."""
        passed = self.input_value(node, name, kind)
        if passed is None:
            return None
        self.skip(node, f"{reason}; its {name!r} input was passed straight through")
        if node.id not in self.changes:
            self.changes[node.id] = Change(node.id, node.class_type, reason)
            self.warn(self.changes[node.id].warning())
        return passed

    # -- loaders --------------------------------------------------------------------------

    def loader(
        self,
        node_id: str,
        node_type: str,
        wanted: str,
        where: str,
        *,
        bundled: bool = False,
        param: str = "file",
        params: Mapping[str, Any] | None = None,
        inputs: Mapping[str, Port | None] | None = None,
    ) -> Port:
        """A loader of `wanted` from its category (its picker `param`, beside `params` and
        `inputs`). `bundled`: one part of a checkpoint, which a mapping of the checkpoint's name
        onto the catalog's diffusion model does not name."""
        spec = self.descriptors[node_type].param(param)
        others, wired = dict(params or {}), dict(inputs or {})
        category = spec.options_from if spec is not None and spec.options_from else ""
        chosen = self.model_file(node_id, category, wanted, where, bundled=bundled)
        return self.add(node_id, node_type, {param: chosen, **others}, wired, where)

    def model_file(
        self, node_id: str, category: str, wanted: str, where: str, *, bundled: bool = False
    ) -> str:
        """The catalog's file in `category` for the workflow's `wanted`: the caller's mapping,
        or the nearest match (recorded in `unmatched` when it is not the file itself)."""
        chosen = self.renamed.get(wanted)
        if chosen is not None and not (bundled and chosen not in self.catalog.options(category)):
            if chosen not in self.catalog.options(category):
                raise InvalidRequest(
                    f"{where}: the import's models map {wanted!r} onto {chosen!r}, which is not "
                    f"in {category}/ (it holds {self.listing(category)})"
                )
            self.warn(f"{where}: model {wanted!r} is {category}/{chosen!r}, as the import maps it")
            return chosen
        match = match_model_file(self.catalog, category, wanted)
        listed = self.catalog.options(category)
        if bundled and not match.found and len(listed) == 1:
            # A checkpoint's own VAE or text encoder cannot load from it here: its folder's only
            # file stands in, said and listed (`using`), as the checkpoint's mapping was asked.
            match = replace(
                match,
                name=listed[0],
                note=f"the checkpoint {wanted!r} bundles its {category} part, which loads from "
                f"{category}/ here; using the only one there, {listed[0]!r}",
            )
        if match.note is not None:
            self.warn(f"{where}: {match.note}")
        if not match.found and node_id not in self.drafts:
            self.unmatched.append(
                {
                    "nodeId": node_id,
                    "comfyNode": where,
                    "file": wanted,
                    "category": category,
                    "using": match.name if match.name in self.catalog.options(category) else None,
                    "candidates": self.candidates(category),
                }
            )
        return match.name

    def candidates(self, category: str) -> list[str]:
        """Every file of `category`, the workflow's family's first (then the others: a file
        the server cannot tell the family of may still be the one)."""
        listed = self.catalog.options(category)
        facts, family = self.facts, self.family
        if facts is None or family is None:
            return listed
        ours = [n for n in listed if facts.takes(family, category, n)]
        return ours + [n for n in listed if n not in ours]

    def chosen_file(self, node_type: str, param: str, wanted: str) -> str:
        """The catalog's file a loader of `wanted` (`node_type`'s picker `param`) picks, as
        `model_file` picks it, without recording anything."""
        spec = self.descriptors[node_type].param(param)
        category = spec.options_from if spec is not None and spec.options_from else ""
        chosen = self.renamed.get(wanted)
        if chosen is not None and chosen in self.catalog.options(category):
            return chosen
        return match_model_file(self.catalog, category, wanted).name

    def listing(self, category: str) -> str:
        listed = self.catalog.options(category)
        if not listed:
            return "nothing"
        return ", ".join(repr(n) for n in listed[:8]) + (", ..." if len(listed) > 8 else "")

    # -- text and conditioning ------------------------------------------------------------

    def text_source(self, node_id: str, text: str, where: str) -> Port:
        return self.add(node_id, "input/text", {"text": text}, {}, where)

    def image_asset(self, node: ComfyNode) -> dict[str, str]:
        """The asset param for a loader's `image` file (empty, with a warning, when it is not
        an uploaded asset here)."""
        name = self.text(node, "image")
        asset = self.asset_for(name)
        if asset is None:
            self.warn(
                f"{describe(node)}: image {name!r} is not an uploaded asset here; upload it "
                "(POST /v1/assets) and set this node's asset"
            )
            asset = ""
        return {"ref": "asset", "id": asset}

    def asset_for(self, name: str) -> str | None:
        # ComfyUI annotates names from its other folders: "x.png [output]".
        bare = name.rsplit(" [", 1)[0] if name.endswith("]") else name
        for candidate in (name, bare, bare.replace("\\", "/").rsplit("/", 1)[-1]):
            if candidate in self.assets:
                return self.assets[candidate]
        if bare.startswith("sha256-"):  # already one of our asset ids
            return bare
        return None

    # -- the whole workflow ---------------------------------------------------------------

    def run(self) -> str | None:
        """Map everything that feeds an image output; return the target node id, if any."""
        nodes = sorted(self.workflow.nodes.values(), key=lambda n: node_sort_key(n.id))
        sinks = [n for n in nodes if n.class_type == SAVE_IMAGE]
        sinks += [n for n in nodes if n.class_type == PREVIEW_IMAGE]
        targets: list[tuple[ComfyNode, str]] = []
        for sink in sinks:
            self._used.add(sink.id)
            image = self.input_value(sink, "images", PortKind.IMAGE)
            if image is not None and image.port is not None:
                targets.append((sink, image.port.node))
        if sinks and targets and targets[0][0] is not sinks[0]:
            self.warn(
                f"{describe(sinks[0])} could not be mapped; the target is the image "
                f"{describe(targets[0][0])} shows"
            )
        if not sinks:
            for decoder in (n for n in nodes if n.class_type in DECODERS):
                image = self.value(Link(decoder.id, 0), PortKind.IMAGE, decoder, "images")
                if image is not None and image.port is not None:
                    self.warn(
                        "the workflow has no SaveImage or PreviewImage node; the target "
                        f"is the image of {describe(decoder)}"
                    )
                    targets.append((decoder, image.port.node))
                    break
        for node in nodes:
            if node.id in self._used or node.id in self.skipped:
                continue
            known = node.class_type in self.handlers
            if known or node.class_type in (SAVE_IMAGE, PREVIEW_IMAGE):
                self.skip(node, UNUSED)
            elif node.class_type in CONSTANT_TYPES:
                self.skip(node, "its value is not used by any mapped node")
            else:
                self.skip(
                    node, f"unknown node type {node.class_type!r}: Inline Core has no equivalent"
                )
        return targets[0][1] if targets else None

    def graph(self) -> Graph:
        return Graph(
            nodes=tuple(
                Node(
                    id=d.id,
                    type=d.type,
                    params=d.params,
                    inputs={
                        k: tuple(Edge(p.node, p.output) for p in ports)
                        for k, ports in d.inputs.items()
                    },
                    list_inputs=frozenset(k for k, ports in d.inputs.items() if len(ports) > 1),
                )
                for d in self.drafts.values()
            )
        )

    def skipped_list(self) -> list[Skipped]:
        return sorted(self.skipped.values(), key=lambda s: node_sort_key(s.node_id))
